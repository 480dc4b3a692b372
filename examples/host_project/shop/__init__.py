"""The shop's own app: its users, its home page, its refunds service and the refund workflow it runs on durable."""
