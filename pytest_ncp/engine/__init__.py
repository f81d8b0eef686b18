"""One episode and many: narrators, players, the auditor, episodes, the runner, workers, shards, forks,
stored failures and re-audits. No pytest, argparse or terminal output: ``ncp run`` and the pytest plugin
drive the same engine."""
