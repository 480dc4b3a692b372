"""API tokens from the command line: create (the token printed once), list, revoke; audited as source "command"."""
from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from durable.errors import Conflict, InvalidInput
from durable.models import ApiToken
from durable.tokens import create_token, revoke_token


class Command(BaseCommand):
    help = "Create, list and revoke API tokens. `create` prints the token once: only its hash is kept."

    def add_arguments(self, parser: CommandParser) -> None:
        commands = parser.add_subparsers(dest="command", required=True)
        create = commands.add_parser("create", help="make a token for a user and print it (once)")
        create.add_argument("--user", required=True, help="the username the token acts as")
        create.add_argument("--name", required=True, help="what holds it: a service, a script, a CI job")
        create.add_argument("--days", type=float, help="days until it expires (default DURABLE_API_TOKEN_DAYS)")
        listing = commands.add_parser("list", help="list tokens: prefix, name, owner, dates; never a token")
        listing.add_argument("--user", help="only this user's tokens")
        revoke = commands.add_parser("revoke", help="revoke a token by its id or its prefix")
        revoke.add_argument("token", help="the id or the prefix (dur_xxxxxxxx) the list shows")
        revoke.add_argument("--reason", default="", help="kept in the audit trail")

    def handle(self, *args: Any, command: str, **options: Any) -> None:
        getattr(self, f"_{command}")(**options)

    def _create(self, *, user: str, name: str, days: float | None, **_: Any) -> None:
        owner = self._user(user)
        expires_at = timezone.now() + timedelta(days=days) if days else None
        try:
            row, token = create_token(user=owner, name=name, expires_at=expires_at, source="command")
        except InvalidInput as exc:
            raise CommandError("; ".join(f"{field}: {' '.join(errors)}" for field, errors in exc.errors.items())) from exc
        self.stderr.write(f"token {row.id} {row.prefix}… for {owner.get_username()}, expires "
                          f"{row.expires_at:%Y-%m-%d %H:%M %Z}; it is printed once, below, and never again:")
        self.stdout.write(token)  # alone on stdout, so a script can capture it

    def _list(self, *, user: str | None, **_: Any) -> None:
        tokens = ApiToken.objects.select_related("user").order_by("-created_at", "-id")
        if user:
            tokens = tokens.filter(user=self._user(user))
        now = timezone.now()
        self.stdout.write("id\tprefix\tname\tuser\tcreated\texpires\tlast used\tstate")
        for t in tokens:
            state = "revoked" if t.revoked_at else "expired" if t.expires_at <= now else "active"
            last = f"{t.last_used_at:%Y-%m-%d %H:%M}" if t.last_used_at else "never"
            self.stdout.write(f"{t.id}\t{t.prefix}\t{t.name}\t{t.user.get_username()}\t{t.created_at:%Y-%m-%d %H:%M}"
                              f"\t{t.expires_at:%Y-%m-%d %H:%M}\t{last}\t{state}")

    def _revoke(self, *, token: str, reason: str, **_: Any) -> None:
        by_id = token.isdigit() and len(token) < 19  # an id fits a bigint; anything else is a prefix
        found = ApiToken.objects.filter(id=int(token)) if by_id else ApiToken.objects.filter(prefix=token)
        ids = list(found.values_list("id", flat=True)[:2])
        if len(ids) != 1:
            raise CommandError(f"{'no' if not ids else 'more than one'} API token has the id or prefix {token!r}; "
                               "see `durable_tokens list`")
        try:
            row = revoke_token(token_id=ids[0], source="command", reason=reason)
        except Conflict as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(f"revoked token {row.id} {row.prefix}… ({row.name}) of {row.user.get_username()}")

    def _user(self, username: str) -> Any:
        User = get_user_model()
        try:
            return User.objects.get(**{User.USERNAME_FIELD: username})
        except User.DoesNotExist:
            raise CommandError(f"no user is called {username!r}") from None
