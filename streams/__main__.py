from ctxbudget.cli import main

main()
