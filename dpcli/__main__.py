from dpcli.cli.app import main

main()
