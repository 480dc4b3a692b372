"""What advances runs: the executor, the step context, side effects (Prepare -> Execute -> Commit), the
ledger, the automatic reconciler's rules, the approval gate the approvals app registers, the lease's
heartbeat, fault points, dispatch, the sweeper and the configuration a Celery worker needs. Workflow
authors never import it; the API and console go through `durable.services`."""
