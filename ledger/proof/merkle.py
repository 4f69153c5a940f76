"""A Merkle tree over the ledger's events, hashed as RFC 9162 (and RFC 6962) define it.

    leaf hash  = SHA-256(0x00 || leaf)
    node hash  = SHA-256(0x01 || left || right)
    empty tree = SHA-256("")

The tree over n leaves D[0:n] is RFC 9162 section 2.1.1's MTH: for n > 1, with k the largest
power of two smaller than n, MTH(D[0:n]) = node(MTH(D[0:k]), MTH(D[k:n])). In a countersign
ledger leaf i is the 32 raw bytes of the stored `hash` of line i + 1 (see ledger.proof.checkpoint and
docs/ledger-format.md); this module knows nothing about ledgers and works on any leaf bytes.

Proofs are lists of 32-byte hashes:
- an inclusion proof (PATH, RFC 9162 section 2.1.3) for leaf `index` in a tree of `size` leaves;
- a consistency proof (PROOF, section 2.1.4) that the tree of `size1` leaves is a prefix of the
  tree of `size2` leaves.

Both are generated from the ranges of leaves whose subtree hashes they list (`inclusion_ranges`,
`consistency_ranges`, pure arithmetic), so the same code serves an in-memory list of leaf hashes
(`inclusion_proof`, `consistency_proof`) and a stream read once (`TreeStream`, which keeps
O(log n) hashes). `verify_inclusion` and `verify_consistency` follow the RFC's verification
algorithms step by step and raise `ProofError` naming what is wrong.
"""

from __future__ import annotations

import hashlib
from typing import Iterable, Sequence

HASH_SIZE = 32
EMPTY_ROOT = hashlib.sha256(b"").digest()
_LEAF, _NODE = b"\x00", b"\x01"
_MAX_LEVELS = 64  # tree sizes are below 2**64


class ProofError(ValueError):
    """A proof does not verify (or its parameters are impossible); the message says why."""


def leaf_hash(leaf: bytes) -> bytes:
    """SHA-256(0x00 || leaf)."""
    return hashlib.sha256(_LEAF + leaf).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    """SHA-256(0x01 || left || right)."""
    return hashlib.sha256(_NODE + left + right).digest()


def _split(n: int) -> int:
    """The largest power of two strictly smaller than n (n >= 2)."""
    return 1 << ((n - 1).bit_length() - 1)


# --- the ranges a proof lists ------------------------------------------------------------------


def inclusion_ranges(index: int, size: int) -> list[tuple[int, int]]:
    """The leaf ranges `[start, end)` whose subtree hashes form PATH(index, D[0:size]), in the
    proof's order (the leaf's sibling first, the root's child last)."""
    if not 0 <= index < size:
        raise ValueError(f"leaf index {index} is not in a tree of {size} leaves")
    ranges: list[tuple[int, int]] = []
    lo, hi = 0, size
    while hi - lo > 1:  # walk down from the root, collecting the siblings top first
        k = lo + _split(hi - lo)
        if index < k:
            ranges.append((k, hi))
            hi = k
        else:
            ranges.append((lo, k))
            lo = k
    ranges.reverse()
    return ranges


def consistency_ranges(size1: int, size2: int) -> list[tuple[int, int]]:
    """The leaf ranges whose subtree hashes form PROOF(size1, D[0:size2]) (RFC 9162 2.1.4.1),
    in the proof's order. Empty when size1 is 0 or equals size2."""
    if not 0 <= size1 <= size2:
        raise ValueError(f"no consistency proof from a tree of {size1} leaves to one of {size2}")
    if size1 == 0 or size1 == size2:
        return []
    ranges: list[tuple[int, int]] = []
    lo, hi, whole = 0, size2, True  # SUBPROOF(m, D[lo:hi], b)
    while True:
        if size1 == hi:
            if not whole:
                ranges.append((lo, hi))
            break
        k = lo + _split(hi - lo)
        if size1 <= k:
            ranges.append((k, hi))
            hi = k
        else:
            ranges.append((lo, k))
            lo, whole = k, False
    ranges.reverse()
    return ranges


# --- in memory: a list of leaf hashes -----------------------------------------------------------


def root_of(leaf_hashes: Iterable[bytes]) -> bytes:
    """MTH over leaf hashes (already SHA-256(0x00 || leaf)), streamed in O(log n) memory."""
    stream = TreeStream()
    for h in leaf_hashes:
        stream.append(h)
    return stream.root()


def subtree_hash(leaf_hashes: Sequence[bytes], start: int, end: int) -> bytes:
    """MTH(D[start:end]) of a list of leaf hashes."""
    if start == end:
        return EMPTY_ROOT
    return root_of(leaf_hashes[start:end])


def inclusion_proof(leaf_hashes: Sequence[bytes], index: int, size: int | None = None) -> list[bytes]:
    """PATH(index, D[0:size]) for a list of leaf hashes (size defaults to all of them)."""
    size = len(leaf_hashes) if size is None else size
    if size > len(leaf_hashes):
        raise ValueError(f"a tree of {size} leaves from a list of {len(leaf_hashes)}")
    return [subtree_hash(leaf_hashes, a, b) for a, b in inclusion_ranges(index, size)]


def consistency_proof(leaf_hashes: Sequence[bytes], size1: int, size2: int | None = None) -> list[bytes]:
    """PROOF(size1, D[0:size2]) for a list of leaf hashes (size2 defaults to all of them)."""
    size2 = len(leaf_hashes) if size2 is None else size2
    if size2 > len(leaf_hashes):
        raise ValueError(f"a tree of {size2} leaves from a list of {len(leaf_hashes)}")
    return [subtree_hash(leaf_hashes, a, b) for a, b in consistency_ranges(size1, size2)]


# --- streaming: leaves read once ----------------------------------------------------------------


class TreeStream:
    """Leaf hashes fed one at a time; the tree's root (and chosen proofs) at the end.

    Keeps the stack of complete subtrees (a compact range: at most one per level, O(log n)).
    Give `index` (or several, `indices`) to be able to produce the inclusion proof of that leaf,
    `old_size` to be able to produce the consistency proof from the tree of that size (and to
    learn that tree's root, `old_root`): the stream then also keeps the few complete subtrees
    those proofs can need (the ancestors of the leaf concerned and their siblings, at most two per
    level), whatever size the stream reaches. `snapshot_sizes` records the root at each of those
    sizes in `roots`.
    """

    def __init__(
        self,
        *,
        index: int | None = None,
        indices: Iterable[int] = (),
        old_size: int | None = None,
        snapshot_sizes: Iterable[int] = (),
    ):
        self.size = 0
        self._stack: list[tuple[int, int, bytes]] = []  # (level, index at that level, hash)
        self._wanted: set[tuple[int, int]] = set()
        self._kept: dict[tuple[int, int], bytes] = {}
        self.index, self.old_size = index, old_size
        self.roots: dict[int, bytes] = {}
        self._snapshots = set(snapshot_sizes)
        if old_size is not None:
            if old_size < 0:
                raise ValueError("a tree size is never negative")
            self._snapshots.add(old_size)
            if old_size > 0:
                self._want_path(old_size - 1)
        self.indices = set(indices) | ({index} if index is not None else set())
        for leaf in self.indices:
            if leaf < 0:
                raise ValueError("a leaf index is never negative")
            self._want_path(leaf)
        if 0 in self._snapshots:
            self.roots[0] = EMPTY_ROOT

    def _want_path(self, leaf: int) -> None:
        for level in range(_MAX_LEVELS):
            at = leaf >> level
            self._wanted.add((level, at))
            self._wanted.add((level, at ^ 1))

    def append(self, leaf_hash_: bytes) -> None:
        """Add the next leaf hash (SHA-256(0x00 || leaf), 32 bytes)."""
        if len(leaf_hash_) != HASH_SIZE:
            raise ValueError("a leaf hash is 32 bytes")
        node = (0, self.size, leaf_hash_)
        if self._wanted and (0, self.size) in self._wanted:
            self._kept[(0, self.size)] = leaf_hash_
        stack = self._stack
        while stack and stack[-1][0] == node[0]:
            level, at, left = stack.pop()
            node = (level + 1, at >> 1, node_hash(left, node[2]))
            if self._wanted and node[:2] in self._wanted:
                self._kept[node[:2]] = node[2]
        stack.append(node)
        self.size += 1
        if self.size in self._snapshots:
            self.roots[self.size] = self.root()

    def extend(self, leaf_hashes: Iterable[bytes]) -> None:
        for h in leaf_hashes:
            self.append(h)

    def root(self) -> bytes:
        """MTH of the leaves so far: the complete subtrees folded from the right."""
        if not self._stack:
            return EMPTY_ROOT
        acc = self._stack[-1][2]
        for _, _, h in reversed(self._stack[:-1]):
            acc = node_hash(h, acc)
        return acc

    @property
    def old_root(self) -> bytes | None:
        """The root of the tree of `old_size` leaves, once the stream has reached that size."""
        return None if self.old_size is None else self.roots.get(self.old_size)

    def _range_hash(self, start: int, end: int) -> bytes:
        width = end - start
        if width & (width - 1) == 0 and start % width == 0:  # a complete, aligned subtree
            key = (width.bit_length() - 1, start // width)
            if key in self._kept:
                return self._kept[key]
        if end == self.size:  # the right edge: complete subtrees of the stack from `start` on
            tail = [(at << level, h) for level, at, h in self._stack if at << level >= start]
            if tail and tail[0][0] == start:
                acc = tail[-1][1]
                for _, h in reversed(tail[:-1]):
                    acc = node_hash(h, acc)
                return acc
        raise LookupError(f"the subtree [{start}, {end}) was not kept")  # a bug, never bad input

    def inclusion_proof(self, index: int | None = None) -> list[bytes]:
        """PATH(index, D[0:size]) for an index given at construction (default: `index`)."""
        index = self.index if index is None else index
        if index is None or index not in self.indices:
            raise ValueError(f"TreeStream was not asked to keep the path of leaf {index}")
        return [self._range_hash(a, b) for a, b in inclusion_ranges(index, self.size)]

    def consistency_proof(self) -> list[bytes]:
        """PROOF(old_size, D[0:size]) for the `old_size` given at construction."""
        if self.old_size is None:
            raise ValueError("TreeStream(old_size=...) was not given")
        return [self._range_hash(a, b) for a, b in consistency_ranges(self.old_size, self.size)]


# --- verification (RFC 9162 sections 2.1.3.2 and 2.1.4.2) --------------------------------------


def _check_hashes(what: str, hashes: Sequence[bytes]) -> None:
    for i, h in enumerate(hashes):
        if not isinstance(h, (bytes, bytearray)) or len(h) != HASH_SIZE:
            raise ProofError(f"{what} {i} is not a 32-byte hash")


def root_from_inclusion_proof(index: int, size: int, leaf_hash_: bytes, proof: Sequence[bytes]) -> bytes:
    """The root that an inclusion proof implies (RFC 9162 2.1.3.2 steps 1 to 6). Raises
    ProofError when the proof cannot be one for leaf `index` of a tree of `size` leaves (index
    out of range, too many or too few hashes, a hash that is not 32 bytes)."""
    if size < 0 or index < 0:
        raise ProofError("sizes and indices are never negative")
    if index >= size:
        raise ProofError(f"leaf index {index} is past the end of a tree of {size} leaves")
    _check_hashes("the leaf hash", [leaf_hash_])
    _check_hashes("proof hash", proof)
    fn, sn, r = index, size - 1, bytes(leaf_hash_)
    for p in proof:
        if sn == 0:
            raise ProofError(f"the proof has more hashes than a tree of {size} leaves needs")
        if fn & 1 or fn == sn:
            r = node_hash(p, r)
            if not fn & 1:
                while fn and not fn & 1:
                    fn >>= 1
                    sn >>= 1
        else:
            r = node_hash(r, p)
        fn >>= 1
        sn >>= 1
    if sn != 0:
        raise ProofError(f"the proof has fewer hashes than leaf {index} of a tree of {size} leaves needs")
    return r


def verify_inclusion(index: int, size: int, leaf_hash_: bytes, proof: Sequence[bytes], root: bytes) -> None:
    """Check that `proof` shows leaf hash `leaf_hash_` at `index` in the tree of `size` leaves
    whose root is `root`. Raises ProofError; returns None when it holds."""
    _check_hashes("the root", [root])
    if root_from_inclusion_proof(index, size, leaf_hash_, proof) != root:
        raise ProofError(f"the inclusion proof for leaf {index} does not lead to the root of the tree of {size} leaves")


def verify_consistency(size1: int, size2: int, root1: bytes, root2: bytes, proof: Sequence[bytes]) -> None:
    """Check that the tree of `size1` leaves with root `root1` is a prefix of the tree of `size2`
    leaves with root `root2`. Raises ProofError; returns None when it holds.

    For 0 < size1 < size2 this is RFC 9162 2.1.4.2. The RFC defines no proof for the other
    sizes; here, as in other implementations, the proof must then be empty, and additionally
    (stricter than some) the roots must be what those sizes imply: for size1 == size2 the same
    root, and for size1 == 0 the empty tree's root.
    """
    if size1 < 0 or size2 < 0:
        raise ProofError("tree sizes are never negative")
    _check_hashes("the first root", [root1])
    _check_hashes("the second root", [root2])
    _check_hashes("proof hash", proof)
    if size2 < size1:
        raise ProofError(f"a tree of {size2} leaves cannot extend one of {size1}: it is shorter")
    if size1 == 0 or size1 == size2:
        if proof:
            raise ProofError(f"the consistency proof from {size1} to {size2} leaves must be empty")
        if size1 == 0 and root1 != EMPTY_ROOT:
            raise ProofError("the root of an empty tree is SHA-256 of nothing")
        if size1 == size2 and root1 != root2:
            raise ProofError(f"two trees of {size1} leaves with different roots")
        return
    if not proof:
        raise ProofError("the consistency proof is empty")
    path = list(proof)
    if size1 & (size1 - 1) == 0:  # an exact power of two: the old root is the first node
        path.insert(0, root1)
    fn, sn = size1 - 1, size2 - 1
    while fn & 1:
        fn >>= 1
        sn >>= 1
    fr = sr = path[0]
    for c in path[1:]:
        if sn == 0:
            raise ProofError(f"the consistency proof has more hashes than {size1} to {size2} leaves needs")
        if fn & 1 or fn == sn:
            fr = node_hash(c, fr)
            sr = node_hash(c, sr)
            if not fn & 1:
                while fn and not fn & 1:
                    fn >>= 1
                    sn >>= 1
        else:
            sr = node_hash(sr, c)
        fn >>= 1
        sn >>= 1
    if sn != 0:
        raise ProofError(f"the consistency proof has fewer hashes than {size1} to {size2} leaves needs")
    if fr != root1:
        raise ProofError(f"the consistency proof does not lead to the root of the tree of {size1} leaves")
    if sr != root2:
        raise ProofError(f"the consistency proof does not lead to the root of the tree of {size2} leaves")
