"""Deploy 1: lookup -> approval -> payment."""
from durable import register
from tests.durable.deploys.steps import approval, build, lookup, payment

v1 = register(build(1, [lookup, approval, payment]))
