"""Notifications: an outbox of events written with the state changes that cause them, delivered by email and
webhook once per event and recipient (docs/notifications.md)."""
