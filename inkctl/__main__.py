from inkctl.cli.app import main

main()
