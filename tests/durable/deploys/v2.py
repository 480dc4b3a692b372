"""Deploy 2 inserts risk_check; a v1 run waiting at its approval may be moved to the risk check."""
from durable import register
from durable.workflow import Migration
from tests.durable.deploys.steps import approval, build, lookup, payment, risk_check

v2 = register(build(2, [lookup, risk_check, approval, payment],
                    migrations=[Migration(from_version=1, step_map={"lookup": "lookup", "approval": "risk_check"})]))
