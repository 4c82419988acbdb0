"""The domain's input error: every builder and rule check raises `SpecError(field, rule)` for bad input.

The class is defined at the lowest floor (topology/errors.py) because the cluster builders raise it too;
this module is where everything above simcore takes it from, so that no caller reaches into topology/.
"""

from __future__ import annotations

from topology.errors import SpecError

__all__ = ["SpecError"]
