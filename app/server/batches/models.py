"""The models a server's batches run on, as the batch service sees them: which names a
batch's lines may give, which model the batch waits for or runs on, and, where models load
on demand, when a batch must let its model go.

    OneEngine     one engine (`chorus serve`, the app's switch): a batch runs on the model
                  the server serves now, and waits while it serves another
    PoolEngines   `chorus serve --models`: each batch on its own model from the model pool
                  (app/engines/model_pool.py), held with a lease while the batch runs and
                  let go when a call for another model waits for room (service.py says why)"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from app.engines.model_pool import Lease, ModelLoadFailed, ModelPool, ModelTooLarge, PoolError, UnknownModel
from app.server.batches.lines import Served
from inference import EngineClient


class ModelUnavailable(Exception):
    """The batch's model cannot be given: its load failed, or it is larger than the whole
    budget (the message says why). The batch fails with it."""


class ModelAway(Exception):
    """The model cannot be given now (the pool is shutting down): the batch waits."""


class Hold(Protocol):
    """A running batch's hold on its model's engine, until release."""

    @property
    def engine(self) -> EngineClient: ...

    def release(self) -> None: ...


class BatchModels(Protocol):
    def default(self) -> str:
        """The model of a line that names none."""
        ...

    def served(self) -> list[str]:
        """The names a line may give (for the error that lists them)."""
        ...

    def resolve(self, name: str) -> str | None:
        """The served model a name (or an alias) means; None when it is not served."""
        ...

    def lines(self, default: str) -> Served:
        """What a batch's lines may name; default: the model of a line naming none (the
        server's default when the batch was made)."""
        ...

    def runnable(self, name: str) -> bool:
        """Whether a batch of this model may run now (else it waits)."""
        ...

    def hold(self, name: str) -> Hold:
        """The model's engine, loaded (blocks while it loads); ModelUnavailable if it
        cannot be, ModelAway if not now."""
        ...

    def wanted_elsewhere(self, name: str) -> bool:
        """Whether a call for another model waits for the room this one takes."""
        ...


class _Kept:
    """One engine's hold: nothing to give back."""

    def __init__(self, engine: EngineClient) -> None:
        self.engine = engine

    def release(self) -> None:
        pass


class OneEngine:
    """model_id: the server's model now (the app renames it when it loads another)."""

    def __init__(self, engine: EngineClient | None, model_id: Callable[[], str]) -> None:
        self.engine, self.model_id = engine, model_id  # engine None: no engine yet (a test's)

    def default(self) -> str:
        return self.model_id()

    def served(self) -> list[str]:
        return [self.model_id()]

    def resolve(self, name: str) -> str | None:
        return name if name == self.model_id() else None

    def lines(self, default: str) -> Served:
        return Served.one(default)  # the model the batch was made for, as ever

    def runnable(self, name: str) -> bool:
        return name == self.model_id()

    def hold(self, name: str) -> Hold:
        if self.engine is None:
            raise ModelAway("no engine")
        return _Kept(self.engine)

    def wanted_elsewhere(self, name: str) -> bool:
        return False


class _Leased:
    def __init__(self, lease: Lease, engine: EngineClient) -> None:
        self._lease, self.engine = lease, engine

    def release(self) -> None:
        self._lease.release()


class PoolEngines:
    """served_name: the served model a name a line gives means (aliases as a call's:
    PooledModels.served_name)."""

    def __init__(self, pool: ModelPool, default: str, served_name: Callable[[str], str] = str) -> None:
        self.pool, self._default, self._served_name = pool, default, served_name

    def default(self) -> str:
        return self._default

    def served(self) -> list[str]:
        return self.pool.names

    def resolve(self, name: str) -> str | None:
        name = self._served_name(name)
        return name if name in self.pool.names else None

    def lines(self, default: str) -> Served:
        return Served(self.resolve(default) or self._default, self.resolve, tuple(self.pool.names))

    def runnable(self, name: str) -> bool:
        return self.resolve(name) is not None

    def hold(self, name: str) -> Hold:
        try:
            lease = self.pool.acquire(self.resolve(name) or name)
        except (UnknownModel, ModelTooLarge) as exc:
            raise ModelUnavailable(str(exc)) from None
        except PoolError as exc:
            raise ModelAway(str(exc)) from None
        try:
            engine = lease.engine()
        except ModelLoadFailed as exc:
            lease.release()
            raise ModelUnavailable(str(exc)) from None
        except PoolError as exc:  # the pool shut down meanwhile
            lease.release()
            raise ModelAway(str(exc)) from None
        except BaseException:
            lease.release()
            raise
        return _Leased(lease, engine)

    def wanted_elsewhere(self, name: str) -> bool:
        own = self.resolve(name) or name
        return any(waiting != own for waiting in self.pool.waiting_for_room())
