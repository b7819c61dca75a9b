from gemmlab.cli.app import main

main()
