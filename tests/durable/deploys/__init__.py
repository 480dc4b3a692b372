"""Two deploys of one refund workflow: a worker loads the modules of the versions it was deployed with."""
