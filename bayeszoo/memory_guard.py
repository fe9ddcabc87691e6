"""The memory guard: what a fit will hold, estimated from the problem before anything is allocated, against the
memory this process may still take; a fit that would not fit is refused with a ValueError saying what to do.

An estimate is a :class:`Need`: named parts in bytes and advice. These parts add up:

* the **stored draws**, the same for every backend: chains x draws x the values of one draw of the model's
  canonical variables (``model.var_dims`` / ``model.coords``), 8 bytes each, counted :data:`DRAW_COPIES` times
  (the backend's arrays and the Fit's, which are built from them: stacked chains, the finiteness check);
* the backend's **working memory**: its dense matrices (an n x n kernel and its Cholesky factor, a design matrix,
  a covariance), declared with the backend (``register(..., memory=...)``, a function ``(model, data, options)
  -> Need``) and counted from its code path. A backend that works with operators declares its vectors, or
  nothing.
* the **pointwise log likelihood** computed as the Fit is built, where it holds more than a few arrays of draws x
  observations: ``model.log_likelihood_memory(data, n_draws)`` (PMKL's quadrature, in blocks).

:func:`check_fit` adds them up and compares the sum with :func:`memory_limit`: the environment variable
``BAYESZOO_MEMORY_LIMIT`` when it is set (e.g. ``"8GiB"``, ``"500MB"``, a number of bytes), otherwise the least of
the physical memory available now (``MemAvailable`` of ``/proc/meminfo``; elsewhere psutil's ``available`` when it
is installed, or ``os.sysconf``), what is left under the process's cgroup memory limit and what is left under its
address-space and data limits (``ulimit -v`` / ``-d``). ``bz.fit`` calls it once, before the backend runs;
``bz.sbc`` runs :func:`check` on its simulations and, run in the same process, one fit's :func:`fit_need`.
"""
from __future__ import annotations

import os
import re
from typing import NamedTuple

#: bytes of one stored value (float64)
BYTES_PER_VALUE = 8
#: the stored draws are held this many times at the peak: as the backend makes them and in the Fit built from them
DRAW_COPIES = 2
#: the environment variable that sets the limit (bytes, or a size such as "8GiB")
LIMIT_VARIABLE = "BAYESZOO_MEMORY_LIMIT"
#: limits at or above this many bytes mean "no limit" (cgroup v1 writes 2**63 - 4096 for none)
NO_LIMIT = 2**60
_UNITS = {"": 1, "b": 1, "k": 10**3, "kb": 10**3, "m": 10**6, "mb": 10**6, "g": 10**9, "gb": 10**9, "t": 10**12,
          "tb": 10**12, "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}


class Need(NamedTuple):
    """A memory estimate: ``parts`` names what is held (``"kernel matrix K (n x n)"``) and its bytes; ``advice``
    says what to change when the total is too much (a smaller or sparser method)."""

    parts: dict
    advice: str = ""

    @property
    def total(self) -> int:
        return int(sum(self.parts.values()))


class Limit(NamedTuple):
    """How many bytes the process may still take, and where that figure comes from."""

    bytes: int
    source: str


# ------------------------------------------------------------------------------------------------ arithmetic
def dense(rows: int, cols: int | None = None, count: float = 1) -> int:
    """Bytes of ``count`` dense float64 matrices of ``rows`` x ``cols`` (square when ``cols`` is None)."""
    cols = rows if cols is None else cols
    return int(round(count * int(rows) * int(cols) * BYTES_PER_VALUE))


def values_per_draw(model, data) -> int:
    """The values one draw of the model's canonical variables holds (a dim without coordinates counts as 1)."""
    coords = model.coords(data)
    total = 0
    for dims in model.var_dims(data).values():
        size = 1
        for dim in dims:
            size *= len(coords[dim]) if dim in coords else 1
        total += size
    return total


def draws_bytes(values: int, draws: int, chains: int) -> int:
    """Bytes of ``chains`` x ``draws`` stored draws of ``values`` values, counted :data:`DRAW_COPIES` times."""
    return int(chains) * int(draws) * int(values) * BYTES_PER_VALUE * DRAW_COPIES


def size_text(n_bytes: float) -> str:
    """A byte count for people: "18.6 GiB", "512 MiB", "3.0 kB"."""
    n_bytes = float(n_bytes)
    for unit, scale in (("PiB", 2**50), ("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("kiB", 2**10)):
        if n_bytes >= scale:
            value = n_bytes / scale
            return f"{value:.3g} {unit}" if value < 1000 else f"{value:,.0f} {unit}"
    return f"{n_bytes:.0f} bytes"


def parse_size(text) -> int:
    """A size as bytes: an integer, or a number with a unit ("8GiB", "500 MB", "2.5e9"); a ValueError otherwise."""
    match = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([A-Za-z]*)\s*", str(text))
    unit = match.group(2).lower() if match else None
    if match is None or unit not in _UNITS or float(match.group(1)) <= 0:
        raise ValueError(f"{LIMIT_VARIABLE} must be a positive size such as 8GiB, 500MB or 2e9 (bytes); "
                         f"got {text!r}")
    return int(float(match.group(1)) * _UNITS[unit])


# ------------------------------------------------------------------------------------------------ the machine
def memory_limit() -> Limit:
    """What this process may still allocate (module docstring): the variable when set, else the least of the
    available physical memory and the room left under the cgroup and the process's own limits."""
    given = os.environ.get(LIMIT_VARIABLE)
    if given:
        return Limit(parse_size(given), LIMIT_VARIABLE)
    found = [limit for limit in (_physical(), _cgroup(), _rlimit()) if limit is not None]
    if not found:
        return Limit(NO_LIMIT, "no memory figure found")
    return min(found, key=lambda limit: limit.bytes)


def _physical() -> Limit | None:
    fields = _key_values("/proc/meminfo", until="MemAvailable")
    if "MemAvailable" in fields:
        return Limit(fields["MemAvailable"] * 1024, "available physical memory (MemAvailable, /proc/meminfo)")
    try:
        import psutil
    except ImportError:
        psutil = None
    if psutil is not None:
        return Limit(int(psutil.virtual_memory().available), "available physical memory (psutil)")
    try:
        return Limit(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"), "free physical memory (sysconf)")
    except (ValueError, OSError, AttributeError):
        return None


def _cgroup(root: str = "/sys/fs/cgroup", membership: str = "/proc/self/cgroup") -> Limit | None:
    """Room under the memory limit of this process's cgroup (v2 ``memory.max``, v1 ``memory.limit_in_bytes``, under
    ``root``; the process's own group from ``membership``); the page cache it may reclaim (inactive file pages)
    counts as room."""
    paths = {}
    try:
        with open(membership) as handle:
            for line in handle:
                _, controllers, path = line.rstrip("\n").split(":", 2)
                paths["v2" if controllers == "" else controllers] = path
    except (OSError, ValueError):
        pass
    candidates = []
    for prefix in dict.fromkeys([f"{root}{paths.get('v2', '')}", root]):
        candidates.append((f"{prefix}/memory.max", f"{prefix}/memory.current", f"{prefix}/memory.stat",
                           "inactive_file", "cgroup memory.max"))
    for prefix in dict.fromkeys([f"{root}/memory{paths.get('memory', '')}", f"{root}/memory"]):
        candidates.append((f"{prefix}/memory.limit_in_bytes", f"{prefix}/memory.usage_in_bytes",
                           f"{prefix}/memory.stat", "total_inactive_file", "cgroup memory.limit_in_bytes"))
    for limit_file, usage_file, stat_file, reclaimable, name in candidates:
        limit, usage = _read_int(limit_file), _read_int(usage_file)
        if limit is None or usage is None:
            continue
        if limit >= NO_LIMIT:
            return None
        room = limit - usage + _key_values(stat_file, scale=1).get(reclaimable, 0)
        return Limit(max(room, 0), f"room under the {name} of this process's cgroup ({size_text(limit)})")
    return None


def _rlimit() -> Limit | None:
    """Room under ``ulimit -v`` (address space, against VmSize) and ``ulimit -d`` (data, against VmData)."""
    try:
        import resource
    except ImportError:
        return None
    status = None   # read only when a limit is set (the usual case has none)
    found = []
    for which, used, name in ((resource.RLIMIT_AS, "VmSize", "address-space limit (ulimit -v)"),
                              (resource.RLIMIT_DATA, "VmData", "data limit (ulimit -d)")):
        soft = resource.getrlimit(which)[0]
        if soft == resource.RLIM_INFINITY or soft >= NO_LIMIT:
            continue
        status = _key_values("/proc/self/status") if status is None else status
        if used not in status:
            continue
        found.append(Limit(max(soft - status[used] * 1024, 0), f"room under the process's {name}, {size_text(soft)}"))
    return min(found, key=lambda limit: limit.bytes) if found else None


def _key_values(path: str, scale: int = 1, until: str | None = None) -> dict:
    """``key: number`` lines (``/proc/meminfo``, ``/proc/self/status``, ``memory.stat``) as {key: int}, up to the
    line of key ``until`` when given (every fit reads the machine's memory: the rest of the file is not needed)."""
    out = {}
    try:
        with open(path) as handle:
            for line in handle:
                parts = line.replace(":", " ").split()
                if len(parts) >= 2 and parts[1].isdigit():
                    out[parts[0]] = int(parts[1]) * scale
                    if parts[0] == until:
                        break
    except OSError:
        pass
    return out


def _read_int(path: str) -> int | None:
    try:
        with open(path) as handle:
            text = handle.read().strip()
    except OSError:
        return None
    if text == "max":
        return NO_LIMIT
    return int(text) if text.isdigit() else None


# ------------------------------------------------------------------------------------------------ the guard
def fit_need(backend, model, data, *, draws: int, chains: int, options: dict) -> Need:
    """What a fit of ``backend`` (a registered backend, ``bayeszoo.registry.Backend``) will hold: its declared
    working memory and the stored draws."""
    working = backend.memory(model, data, options) if getattr(backend, "memory", None) is not None else Need({})
    values = values_per_draw(model, data)
    held = {1: "once", 2: "twice"}.get(DRAW_COPIES, f"{DRAW_COPIES} times")
    label = (f"stored draws ({chains:,} chains x {draws:,} draws x {values:,} values, held {held} while the fit "
             f"is built)")
    # the pointwise log likelihood is computed as the fit is built, on top of the stored draws
    pointwise = model.log_likelihood_memory(data, int(chains) * int(draws))
    return Need({**working.parts, label: draws_bytes(values, draws, chains), **pointwise}, working.advice)


def check(owner: str, need: Need, *, limit: Limit | None = None, draws: int | None = None,
          chains: int | None = None, values: int | None = None, thin: bool = False, what: str = "this fit") -> None:
    """A ValueError when ``need`` exceeds ``limit`` (:func:`memory_limit` when None), naming the estimate, its
    largest parts, the limit and what to do. With ``draws``, ``chains`` and ``values`` (one draw's values) it also
    says how many draws would fit; ``thin``: the backend keeps every thin-th sweep. ``what`` names the work
    ("this fit", or the simulations and fits of a loop of fits)."""
    limit = memory_limit() if limit is None else limit
    total = need.total
    if total <= limit.bytes:
        return
    parts = sorted(need.parts.items(), key=lambda item: -item[1])
    shown = "; ".join(f"{what}: {size_text(size)}" for k, (what, size) in enumerate(parts[:4])
                      if k == 0 or size >= 0.01 * total)
    todo = []
    stored = 0
    if draws is not None and chains is not None and values:
        stored = draws_bytes(values, draws, chains)
        room = limit.bytes - (total - stored)
        if stored > total / 2:
            room = max(room, 0)
            fits, chains_fit = room // draws_bytes(values, 1, chains), room // draws_bytes(values, draws, 1)
            if fits:
                fewer, notes = "ask for fewer draws or chains", [f"at most {fits:,} draws of {chains:,} chains fit"]
            elif chains_fit:
                fewer, notes = "ask for fewer chains", [f"at most {chains_fit:,} chains of {draws:,} draws fit"]
            else:
                fewer, notes = "ask for fewer draws and chains", []
            if thin:
                notes.append("thin=k keeps one sweep in k, so fewer draws still span as many sweeps")
            todo.append(fewer + (f" ({'; '.join(notes)})" if notes else ""))
    if need.advice and total - stored > limit.bytes / 2:     # the backend's own matrices are the problem too
        todo.append(need.advice)
    todo.append("run it on a machine with more memory (bz.compare(..., executor=dask_client) runs it on a Dask "
                "cluster's worker)")
    raise ValueError(f"{owner}: {what} would need about {size_text(total)} of memory ({shown}), more than the "
                     f"{size_text(limit.bytes)} this process may take ({limit.source}). To fit it: "
                     f"{'; or '.join(todo)}. {LIMIT_VARIABLE} sets another limit.")


def check_fit(backend, model, data, *, draws: int, chains: int, options: dict, limit: Limit | None = None) -> Need:
    """The guard ``bz.fit`` runs before the backend: :func:`fit_need` against :func:`memory_limit` (or ``limit``),
    a ValueError from :func:`check` when it does not fit. Returns the estimate."""
    need = fit_need(backend, model, data, draws=draws, chains=chains, options=options)
    check(backend.owner, need, limit=limit, draws=draws, chains=chains, values=values_per_draw(model, data),
          thin="thin" in getattr(backend, "options", {}))
    return need
