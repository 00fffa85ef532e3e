from trawler.cli import main

main()
