from rlagent.cli import main

main()
