"""torchrun, runnable on Debian 12's torch 1.13 with Python 3.11.

``python3 -m kiln.torchrun --nproc_per_node 4 train.py`` is torchrun. On
Python 3.11 torch 1.13's ``Std.from_str("0")`` returns None (3.11 stopped
iterating a zero-valued IntFlag member), so the stock ``torchrun`` dies at
start with "'NoneType' object has no attribute 'get'" for every value of
--redirects/--tee. This module fixes that one function and runs torchrun's
own main(); every torchrun option works as documented.
"""

import re
import sys

from torch.distributed.elastic.multiprocessing import api as _api


def _std_from_str(vm):
    def to_std(v):
        return _api.Std(int(v))

    if re.fullmatch(r"\d", vm):
        return to_std(vm)
    if re.fullmatch(r"(\d:\d,?)*", vm):
        return {int(i): to_std(v) for i, v in (m.split(":") for m in vm.split(",") if m)}
    raise ValueError(f"{vm} does not match: <{_api._VALUE_REGEX}> or <{_api._MAPPING_REGEX}>")


_api.Std.from_str = staticmethod(_std_from_str)


def main():
    from torch.distributed import run
    run.main()


if __name__ == "__main__":
    sys.exit(main())
