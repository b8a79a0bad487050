"""Who may give a staff command here, and what it reaches: decided once per command (pure).

Staff (`STAFF_USER_IDS`, or a `STAFF_ROLE_IDS` role the message's member holds, which is a
role of the guild the message was sent in) act only inside the guild where the command is
given. Operators (`OPERATOR_USER_IDS`) also do what reaches past one guild: `!bot pin global`,
removing a global pin or another guild's pin, and any staff command sent by DM (whose listing
then reaches every origin)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from app.channel.exchange import Place
from app.commands.invocation import Invocation
from app.commands.parser import StaffCommand, StaffPin
from app.config import Settings


class Refusal(StrEnum):
    """The answer to a command its author may not give here (nothing changes)."""

    NOT_STAFF = "Sorry, only staff can use the bot's staff commands."
    BY_DM = (
        "Not allowed: staff commands sent by DM need an operator. "
        "Give the command in the server it is about."
    )
    GLOBAL_PIN = "Not allowed: only an operator can pin a fact for every channel."
    GLOBAL_UNPIN = "Not allowed: only an operator can remove a pin for every channel."
    OTHER_GUILD_PIN = "Not allowed: that pin belongs to another server."
    OTHER_GUILD_CHANNEL = "Not allowed: that channel belongs to another server."


@dataclass(frozen=True, slots=True)
class Authority:
    """What the author of one command may do where they gave it."""

    actor_id: int
    guild_id: int | None  # where the command was given; None: a DM
    staff_here: bool  # staff of this guild (never in a DM)
    operator: bool

    @classmethod
    def of(cls, who: Invocation, settings: Settings) -> Authority:
        guild_id = who.guild_id
        # The member roles a frame or an interaction carries are this guild's: a role held
        # elsewhere never shows here (and a DM carries none).
        roles = who.roles if guild_id is not None else ()
        staff = who.user_id in settings.staff_user_ids or any(
            role in settings.staff_role_ids for role in roles
        )
        return cls(
            actor_id=who.user_id,
            guild_id=guild_id,
            staff_here=staff and guild_id is not None,
            operator=who.user_id in settings.operator_user_ids,
        )

    @property
    def is_staff(self) -> bool:
        """May give staff commands (and be treated as staff) here."""
        return self.operator or self.staff_here

    @property
    def level(self) -> str:
        """For the log line of each act: the authority it was done with."""
        return "operator" if self.operator else "staff"

    @property
    def reach(self) -> Place:
        """Whose memories a listing or `forget-fact` reaches: those learned in this guild;
        by DM (an operator's) every origin."""
        return Place(self.guild_id)

    def refusal(self, command: StaffCommand) -> Refusal | None:
        """Why ``command`` may not be given here, or None when it may."""
        if self.guild_id is None and not self.operator:
            return Refusal.BY_DM
        if not self.is_staff:
            return Refusal.NOT_STAFF
        if isinstance(command, StaffPin) and command.scope == "global" and not self.operator:
            return Refusal.GLOBAL_PIN
        return None

    def unpin_refusal(self, scope: str, pin_guild_id: int | None) -> Refusal | None:
        """Why the pin (its scope, and the guild of its channel) may not be removed here."""
        if self.operator:
            return None
        if scope == "global":
            return Refusal.GLOBAL_UNPIN
        if pin_guild_id is None or pin_guild_id != self.guild_id:
            return Refusal.OTHER_GUILD_PIN
        return None
