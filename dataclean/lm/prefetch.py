"""`prefetch(array, index)`: ask the CPU to bring an element into cache, from compiled code.

Hash-table lookups whose slots are far apart in memory (the n-gram tables of `dataclean.lm.ngram`,
10 MB for a bundled model) wait for memory at each word, and a mispredicted branch on whether an
n-gram was found throws away the loads the CPU had started ahead of it: the lookups of successive
words run one after another. Numba has no prefetch of its own; this is LLVM's (`llvm.prefetch`,
read, keep in all cache levels), a hint that never faults, so an index may be any position inside
the array (`dataclean.lang.fasttext` has a two-dimensional one). Issued 8 words ahead of the
lookup, it made the scorer's loop over orders about 2x faster on the bundled en and zh models
(0.37x / 0.30x of KenLM's query time against 0.7x-0.8x, `benchmarks/bench_perplexity.py`'s
corpora).
"""

from __future__ import annotations

from typing import Any

from llvmlite import ir
from numba.core import cgutils, types
from numba.core.extending import intrinsic

_READ, _KEEP_IN_ALL_LEVELS, _DATA = 0, 3, 1


@intrinsic
def prefetch(typing_context: Any, array: Any, index: Any) -> Any:
    """Prefetch array[index] (a one-dimensional array, an integer index within it)."""
    signature = types.void(array, index)

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        array_type = sig.args[0]
        array_value = context.make_array(array_type)(context, builder, args[0])
        pointer = cgutils.get_item_pointer(  # type: ignore[no-untyped-call]
            context, builder, array_type, array_value, [args[1]], wraparound=False
        )
        byte_pointer = ir.IntType(8).as_pointer()
        int32 = ir.IntType(32)
        function_type = ir.FunctionType(ir.VoidType(), [byte_pointer, int32, int32, int32])
        function = cgutils.get_or_insert_function(  # type: ignore[no-untyped-call]
            builder.module, function_type, "llvm.prefetch.p0"
        )
        flags = (int32(_READ), int32(_KEEP_IN_ALL_LEVELS), int32(_DATA))
        builder.call(function, [builder.bitcast(pointer, byte_pointer), *flags])
        return context.get_dummy_value()

    return signature, codegen
