from inkctl.cli.app import run

run()
