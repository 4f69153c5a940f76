"""ledger.proof.merkle against the published RFC 6962 / RFC 9162 test vectors and by property.

The vectors are data from transparency-dev/merkle (`testonly/constants.go`: leaf inputs, node
hashes and roots for sizes 0 to 8; `proof/verify_test.go`: inclusion and consistency proofs and
the corruption probes every verifier must reject).
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.proof import merkle
from ledger.proof.merkle import (
    EMPTY_ROOT,
    ProofError,
    TreeStream,
    consistency_proof,
    inclusion_proof,
    leaf_hash,
    root_of,
    verify_consistency,
    verify_inclusion,
)

h = bytes.fromhex

LEAF_INPUTS = [h(x) for x in ("", "00", "10", "2021", "3031", "40414243", "5051525354555657", "606162636465666768696a6b6c6d6e6f")]

# NODE_HASHES[level][i]: the complete subtree of 2**level leaves starting at leaf i * 2**level.
NODE_HASHES = [
    [
        h("6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d"),
        h("96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7"),
        h("0298d122906dcfc10892cb53a73992fc5b9f493ea4c9badb27b791b4127a7fe7"),
        h("07506a85fd9dd2f120eb694f86011e5bb4662e5c415a62917033d4a9624487e7"),
        h("bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b"),
        h("4271a26be0d8a84f0bd54c8c302e7cb3a3b5d1fa6780a40bcce2873477dab658"),
        h("b08693ec2e721597130641e8211e7eedccb4c26413963eee6c1e2ed16ffb1a5f"),
        h("46f6ffadd3d06a09ff3c5860d2755c8b9819db7df44251788c7d8e3180de8eb1"),
    ],
    [
        h("fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125"),
        h("5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e"),
        h("0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a"),
        h("ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0"),
    ],
    [
        h("d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7"),
        h("6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4"),
    ],
    [h("5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328")],
]

# ROOTS[n]: the root of the tree over the first n leaf inputs.
ROOTS = [
    h("e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"),
    h("6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d"),
    h("fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125"),
    h("aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77"),
    h("d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7"),
    h("4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4"),
    h("76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef"),
    h("ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c"),
    h("5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328"),
]

# (leaf index, tree size, proof); the published vectors number leaves from 1.
INCLUSION_VECTORS = [
    (0, 1, []),
    (0, 8, [h("96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7"),
            h("5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e"),
            h("6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4")]),
    (5, 8, [h("bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b"),
            h("ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0"),
            h("d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7")]),
    (2, 3, [h("fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125")]),
    (1, 5, [h("6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d"),
            h("5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e"),
            h("bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b")]),
]

# (size1, size2, proof)
CONSISTENCY_VECTORS = [
    (1, 1, []),
    (1, 8, [h("96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7"),
            h("5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e"),
            h("6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4")]),
    (6, 8, [h("0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a"),
            h("ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0"),
            h("d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7")]),
    (2, 5, [h("5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e"),
            h("bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b")]),
    (6, 7, [h("0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a"),
            h("b08693ec2e721597130641e8211e7eedccb4c26413963eee6c1e2ed16ffb1a5f"),
            h("d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7")]),
]

SOME_HASH = h("abacaba000000000000000000000000000000000000000000060061e00123456")
LEAF_HASHES = [leaf_hash(x) for x in LEAF_INPUTS]


def accepts_inclusion(index, size, leaf, proof, root) -> bool:
    try:
        verify_inclusion(index, size, leaf, proof, root)
    except ProofError:
        return False
    return True


def accepts_consistency(size1, size2, root1, root2, proof) -> bool:
    try:
        verify_consistency(size1, size2, root1, root2, proof)
    except ProofError:
        return False
    return True


def flip(proof, i, mask):
    out = list(proof)
    out[i] = bytes([out[i][0] ^ mask]) + out[i][1:]
    return out


def inclusion_probes(index, size, proof, root, leaf):
    """The published corruption probes for an inclusion proof: each must be rejected."""
    probes = {
        "leaf index - 1": (index - 1, size, leaf, proof, root),
        "leaf index + 1": (index + 1, size, leaf, proof, root),
        "leaf index ^ 2": (index ^ 2, size, leaf, proof, root),
        "tree size * 2": (index, size * 2, leaf, proof, root),
        "tree size / 2": (index, size // 2, leaf, proof, root),
        "wrong leaf": (index, size, b"WrongLeaf", proof, root),
        "empty root": (index, size, leaf, proof, EMPTY_ROOT),
        "random root": (index, size, leaf, proof, SOME_HASH),
        "trailing garbage": (index, size, leaf, proof + [b""], root),
        "trailing root": (index, size, leaf, proof + [root], root),
        "preceding garbage": (index, size, leaf, [b""] + proof, root),
        "preceding root": (index, size, leaf, [root] + proof, root),
    }
    for i in range(len(proof)):
        probes[f"modified proof[{i}] bit 3"] = (index, size, leaf, flip(proof, i, 8), root)
    if proof:
        probes["removed component"] = (index, size, leaf, proof[:-1], root)
    if len(proof) > 1:
        probes["inserted component"] = (index, size, leaf, [proof[0], SOME_HASH] + proof[1:], root)
    return probes


def consistency_probes(size1, size2, root1, root2, proof):
    """The published corruption probes for a (non-empty) consistency proof."""
    probes = {
        "size1 - 1": (size1 - 1, size2, root1, root2, proof),
        "size1 + 1": (size1 + 1, size2, root1, root2, proof),
        "size1 ^ 2": (size1 ^ 2, size2, root1, root2, proof),
        "size2 * 2": (size1, size2 * 2, root1, root2, proof),
        "size2 / 2": (size1, size2 // 2, root1, root2, proof),
        "wrong root1": (size1, size2, b"WrongRoot", root2, proof),
        "wrong root2": (size1, size2, root1, b"WrongRoot", proof),
        "swapped roots": (size1, size2, root2, root1, proof),
        "empty proof": (size1, size2, root1, root2, []),
        "trailing garbage": (size1, size2, root1, root2, proof + [b""]),
        "trailing root1": (size1, size2, root1, root2, proof + [root1]),
        "trailing root2": (size1, size2, root1, root2, proof + [root2]),
        "preceding garbage": (size1, size2, root1, root2, [b""] + proof),
        "preceding root1": (size1, size2, root1, root2, [root1] + proof),
        "preceding root2": (size1, size2, root1, root2, [root2] + proof),
        "preceding proof[0]": (size1, size2, root1, root2, [proof[0]] + proof),
        "truncated proof": (size1, size2, root1, root2, proof[:-1]),
    }
    for i in range(len(proof)):
        probes[f"modified proof[{i}] bit 4"] = (size1, size2, root1, root2, flip(proof, i, 16))
    return probes


# --- hashing and roots ------------------------------------------------------------------------


def test_leaf_hashes_match_the_published_leaf_level_nodes():
    assert LEAF_HASHES == NODE_HASHES[0]


def test_every_complete_subtree_hash_matches_the_published_node_hashes():
    for level, nodes in enumerate(NODE_HASHES):
        width = 1 << level
        for i, expected in enumerate(nodes):
            assert merkle.subtree_hash(LEAF_HASHES, i * width, (i + 1) * width) == expected, (level, i)


def test_roots_of_trees_of_0_to_8_leaves_match_the_published_roots():
    for n, expected in enumerate(ROOTS):
        assert root_of(LEAF_HASHES[:n]) == expected, n


def test_the_empty_tree_root_is_sha256_of_nothing():
    assert EMPTY_ROOT == ROOTS[0] == TreeStream().root()


def test_a_stream_records_the_root_at_every_size_asked_for():
    stream = TreeStream(snapshot_sizes=range(9))
    stream.extend(LEAF_HASHES)
    assert [stream.roots[n] for n in range(9)] == ROOTS


def test_a_stream_keeps_one_hash_per_level_at_most():
    stream = TreeStream()
    for i in range(1000):
        stream.append(leaf_hash(i.to_bytes(4, "big")))
        assert len(stream._stack) == bin(stream.size).count("1")


# --- the published proofs ----------------------------------------------------------------------


@pytest.mark.parametrize("index,size,proof", INCLUSION_VECTORS)
def test_inclusion_proofs_equal_the_published_vectors_and_verify(index, size, proof):
    assert inclusion_proof(LEAF_HASHES, index, size) == proof
    stream = TreeStream(index=index)
    stream.extend(LEAF_HASHES[:size])
    assert stream.inclusion_proof() == proof
    assert merkle.root_from_inclusion_proof(index, size, LEAF_HASHES[index], proof) == ROOTS[size]
    verify_inclusion(index, size, LEAF_HASHES[index], proof, ROOTS[size])


@pytest.mark.parametrize("size1,size2,proof", CONSISTENCY_VECTORS)
def test_consistency_proofs_equal_the_published_vectors_and_verify(size1, size2, proof):
    assert consistency_proof(LEAF_HASHES, size1, size2) == proof
    stream = TreeStream(old_size=size1)
    stream.extend(LEAF_HASHES[:size2])
    assert stream.consistency_proof() == proof
    assert stream.old_root == ROOTS[size1]
    verify_consistency(size1, size2, ROOTS[size1], ROOTS[size2], proof)


@pytest.mark.parametrize("index,size,proof", INCLUSION_VECTORS)
def test_every_published_inclusion_corruption_probe_is_rejected(index, size, proof):
    accepted = [
        name
        for name, args in inclusion_probes(index, size, proof, ROOTS[size], LEAF_HASHES[index]).items()
        if accepts_inclusion(*args)
    ]
    assert accepted == []


@pytest.mark.parametrize("size1,size2,proof", [v for v in CONSISTENCY_VECTORS if v[2]])
def test_every_published_consistency_corruption_probe_is_rejected(size1, size2, proof):
    accepted = [
        name
        for name, args in consistency_probes(size1, size2, ROOTS[size1], ROOTS[size2], proof).items()
        if accepts_consistency(*args)
    ]
    assert accepted == []


@pytest.mark.parametrize("index,size", [(0, 0), (0, 1), (1, 0), (2, 1)])
def test_inclusion_with_an_impossible_index_or_a_malformed_root_or_leaf_is_rejected(index, size):
    assert not accepts_inclusion(index, size, SOME_HASH, [], b"")
    assert not accepts_inclusion(index, size, b"", [], EMPTY_ROOT)
    assert not accepts_inclusion(index, size, SOME_HASH, [], EMPTY_ROOT)


def test_a_single_leaf_tree_has_an_empty_inclusion_proof_and_checks_hash_lengths():
    leaf = leaf_hash(b"data")
    assert accepts_inclusion(0, 1, leaf, [], leaf)
    assert not accepts_inclusion(0, 1, b"", [], leaf)
    assert not accepts_inclusion(0, 1, leaf, [], b"")
    assert not accepts_inclusion(0, 1, b"", [], b"")


def test_inclusion_index_past_the_size_is_rejected_with_a_reason():
    with pytest.raises(ProofError, match="past the end"):
        verify_inclusion(8, 8, LEAF_HASHES[0], INCLUSION_VECTORS[1][2], ROOTS[8])


R1, R2 = b"don't care 1".ljust(32, b"."), b"don't care 2".ljust(32, b".")


@pytest.mark.parametrize(
    "size1,size2,root1,root2,proof,ok",
    [
        (0, 0, R1, R2, [], False),
        (1, 1, R1, R2, [], False),
        (0, 0, EMPTY_ROOT, EMPTY_ROOT, [], True),
        (0, 1, EMPTY_ROOT, R2, [], True),
        (1, 1, R2, R2, [], True),
        (1, 0, R1, R2, [], False),  # time travel to the past
        (2, 1, R1, R2, [], False),
        (1, 2, R1, R2, [], False),  # empty proof
        (0, 0, EMPTY_ROOT, R2, [], False),
        (1, 1, EMPTY_ROOT, R2, [], False),
        (0, 0, EMPTY_ROOT, EMPTY_ROOT, [EMPTY_ROOT], False),  # roots match but the proof is not empty
        (0, 1, EMPTY_ROOT, EMPTY_ROOT, [EMPTY_ROOT], False),
        (1, 1, EMPTY_ROOT, EMPTY_ROOT, [EMPTY_ROOT], False),
        # Stricter than the published table, which accepts any first root for size 0:
        (0, 0, R1, R1, [], False),
        (0, 1, R1, R2, [], False),
    ],
)
def test_consistency_between_trivial_sizes_needs_an_empty_proof_and_the_roots_those_sizes_imply(size1, size2, root1, root2, proof, ok):
    assert accepts_consistency(size1, size2, root1, root2, proof) is ok


# --- streaming equals in memory, for every small tree -------------------------------------------


def test_streamed_proofs_equal_in_memory_proofs_for_every_index_and_size_up_to_40():
    leaves = [leaf_hash(i.to_bytes(2, "big")) for i in range(40)]
    for n in range(1, 41):
        root = root_of(leaves[:n])
        for i in range(n):
            stream = TreeStream(index=i, old_size=i + 1)
            stream.extend(leaves[:n])
            assert stream.root() == root
            assert stream.inclusion_proof() == inclusion_proof(leaves, i, n), (i, n)
            assert stream.consistency_proof() == consistency_proof(leaves, i + 1, n), (i + 1, n)
            assert stream.old_root == root_of(leaves[: i + 1])


# --- property: every proof verifies and every mutation is rejected ------------------------------


def _leaves(n: int) -> list[bytes]:
    return [leaf_hash(b"leaf %d" % i) for i in range(n)]


def _mutations(proof: list[bytes], data):
    """A handful of mutated copies of a proof: a flipped bit, a hash dropped, added or swapped."""
    out = []
    if proof:
        i = data.draw(st.integers(0, len(proof) - 1))
        bit = data.draw(st.integers(0, 255))
        changed = list(proof)
        changed[i] = bytes(b ^ (1 << (bit % 8)) if j == bit // 8 else b for j, b in enumerate(proof[i]))
        out += [changed, proof[:i] + proof[i + 1 :], proof[:i] + [proof[i]] + proof[i:]]
        if len(proof) > 1:
            j = (i + 1) % len(proof)
            swapped = list(proof)
            swapped[i], swapped[j] = swapped[j], swapped[i]
            out.append(swapped)
    out += [proof + [SOME_HASH], [SOME_HASH] + proof, proof + [proof[-1] if proof else EMPTY_ROOT]]
    return out


@settings(max_examples=150, deadline=None)
@given(data=st.data(), size=st.integers(1, 600))
def test_every_generated_inclusion_proof_verifies_and_every_mutation_is_rejected(data, size):
    leaves = _leaves(size)
    index = data.draw(st.integers(0, size - 1))
    stream = TreeStream(index=index, snapshot_sizes=range(1, size + 1))
    stream.extend(leaves)
    proof, root = stream.inclusion_proof(), stream.root()
    verify_inclusion(index, size, leaves[index], proof, root)
    for bad in _mutations(proof, data):
        assert not accepts_inclusion(index, size, leaves[index], bad, root)
    other = data.draw(st.integers(0, size - 1).filter(lambda i: i != index)) if size > 1 else None
    if other is not None:
        assert not accepts_inclusion(other, size, leaves[index], proof, root)
        assert not accepts_inclusion(other, size, leaves[other], proof, root)
    # A valid proof for this size is rejected against the root of any other size.
    other_size = data.draw(st.integers(1, size + 5).filter(lambda s: s != size))
    if other_size <= size:
        assert not accepts_inclusion(index, other_size, leaves[index], proof, stream.roots[other_size])
    assert not accepts_inclusion(index, size, leaves[index], proof, SOME_HASH)
    assert not accepts_inclusion(size, size, leaves[index], proof, root)


@settings(max_examples=150, deadline=None)
@given(data=st.data(), size2=st.integers(2, 600))
def test_every_generated_consistency_proof_verifies_and_every_mutation_is_rejected(data, size2):
    leaves = _leaves(size2)
    size1 = data.draw(st.integers(1, size2 - 1))
    stream = TreeStream(old_size=size1, snapshot_sizes=range(1, size2 + 1))
    stream.extend(leaves)
    proof, root1, root2 = stream.consistency_proof(), stream.old_root, stream.root()
    verify_consistency(size1, size2, root1, root2, proof)
    for bad in _mutations(proof, data):
        assert not accepts_consistency(size1, size2, root1, root2, bad)
    assert not accepts_consistency(size1, size2, root2, root1, proof)
    assert not accepts_consistency(size1, size2, SOME_HASH, root2, proof)
    assert not accepts_consistency(size1, size2, root1, SOME_HASH, proof)
    assert not accepts_consistency(size2, size1, root2, root1, proof)
    # Against the true roots of other sizes, this proof is rejected.
    other1 = data.draw(st.integers(1, size2 - 1))
    if other1 != size1:
        assert not accepts_consistency(other1, size2, stream.roots[other1], root2, proof)
    other2 = data.draw(st.integers(size1 + 1, size2))
    if other2 != size2:
        assert not accepts_consistency(size1, other2, root1, stream.roots[other2], proof)
