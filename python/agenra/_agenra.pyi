"""Type stubs of the compiled module `agenra._agenra` (python/src/lib.rs)."""

from typing import Any, Literal, Mapping, Optional, Sequence, final

Verdict = Literal["ALLOW", "DENY", "PAUSE"]

class AgenraError(Exception):
    """Base class of the errors Agenra raises."""

class PolicyError(AgenraError):
    """Policy text that does not compile."""

    diagnostics: list[Diagnostic]

class SessionError(AgenraError):
    """An event the session cannot apply; the session is unchanged."""

@final
class Diagnostic:
    @property
    def severity(self) -> Literal["error", "warning"]: ...
    @property
    def file(self) -> str: ...
    @property
    def line(self) -> int: ...
    @property
    def column(self) -> int: ...
    @property
    def message(self) -> str: ...

@final
class Policy:
    @property
    def name(self) -> str: ...
    @property
    def hash(self) -> str: ...
    @property
    def warnings(self) -> list[Diagnostic]: ...
    def tools(self) -> list[str]: ...
    def session(self, *, record: bool = False, id_prefix: str = "py-") -> Session: ...

@final
class Decision:
    @property
    def call(self) -> str: ...
    @property
    def tool(self) -> Optional[str]: ...
    @property
    def verdict(self) -> Verdict: ...
    @property
    def allowed(self) -> bool: ...
    @property
    def rule(self) -> str: ...
    @property
    def reason(self) -> str: ...
    @property
    def path(self) -> list[int]: ...
    @property
    def node(self) -> int: ...
    @property
    def grants(self) -> list[str]: ...
    @property
    def ledger_hash(self) -> str: ...
    @property
    def policy_hash(self) -> str: ...
    def __bool__(self) -> bool: ...

@final
class Applied:
    @property
    def call(self) -> str: ...
    @property
    def node(self) -> int: ...
    @property
    def rule(self) -> Optional[str]: ...
    @property
    def reason(self) -> str: ...
    @property
    def refunded(self) -> list[str]: ...
    @property
    def ledger_hash(self) -> str: ...

@final
class Stop:
    @property
    def verdict(self) -> Literal["DENY", "PAUSE"]: ...
    @property
    def rule(self) -> str: ...
    @property
    def reason(self) -> str: ...
    @property
    def path(self) -> list[int]: ...

@final
class Session:
    def __init__(self, policy: Policy, *, record: bool = False, id_prefix: str = "py-") -> None: ...
    def authorize(
        self,
        tool: str,
        args: Optional[Mapping[str, Any]] = None,
        *,
        id: Optional[str] = None,
        time: Optional[int] = None,
        lineage: Optional[Mapping[str, Sequence[str]]] = None,
        agent: Optional[str] = None,
    ) -> Decision: ...
    def check(
        self,
        tool: str,
        args: Optional[Mapping[str, Any]] = None,
        *,
        id: Optional[str] = None,
        time: Optional[int] = None,
        lineage: Optional[Mapping[str, Sequence[str]]] = None,
        agent: Optional[str] = None,
    ) -> Decision: ...
    def check_all(
        self,
        tool: str,
        args: Optional[Mapping[str, Any]] = None,
        *,
        id: Optional[str] = None,
        time: Optional[int] = None,
        lineage: Optional[Mapping[str, Sequence[str]]] = None,
        agent: Optional[str] = None,
    ) -> list[Stop]: ...
    def report(
        self,
        call: str,
        status: Literal["succeeded", "failed", "unknown"] = "succeeded",
        output: Any = None,
        *,
        discovered: Optional[Sequence[str]] = None,
        time: Optional[int] = None,
    ) -> Applied: ...
    def approve(self, call: str, *, time: Optional[int] = None) -> Decision: ...
    def reject(self, call: str, *, time: Optional[int] = None) -> Applied: ...
    def task(
        self,
        text: str,
        *,
        id: Optional[str] = None,
        sets: Optional[Mapping[str, Sequence[str]]] = None,
        scope: Optional[Mapping[str, Any]] = None,
        time: Optional[int] = None,
    ) -> Applied: ...
    def trace(self) -> list[str]: ...
    def grant_left(self, name: str) -> Optional[int]: ...
    @property
    def policy_hash(self) -> str: ...

def compile_policy(text: str, name: str = "policy", filename: Optional[str] = None) -> Policy: ...
def load_compiled_policy(text: str, filename: Optional[str] = None) -> Policy: ...
def to_monitor_value(value: Any) -> Any: ...
