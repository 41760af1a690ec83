import sys

from bnstudy import forkserver

# A job of a local Snakemake run goes to the fork server when one takes it (bnstudy.forkserver);
# otherwise, and always outside Snakemake, the verb runs in this process.
code = forkserver.delegate(sys.argv[1:])
if code is None:
    from bnstudy.cli.main import main

    code = main()
raise SystemExit(code)
