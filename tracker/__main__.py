from tracker.cli.app import main

main()
