from worker.cli.app import main

main()
