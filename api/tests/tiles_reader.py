#!/usr/bin/env python3
"""An independent C2SP tlog-tiles reader, written from the specifications
(c2sp.org/tlog-tiles, c2sp.org/tlog-checkpoint, RFC 6962 section 2.1) with
the Python standard library alone. It shares no code with the ledger.

It reads a log's checkpoint, tiles and entry bundles from a URL or a
directory, and checks that:
  - every entry in the bundles hashes to its leaf hash in the level-0 tiles;
  - the tree hash computed from the tiles equals the checkpoint's root;
  - with --api, every inclusion proof and a set of consistency proofs,
    rebuilt from tiles alone, equal the API's (/v1/proofs/...), and every
    entry equals the API's /v1/entries/{i}.

Exit status 0 when everything agrees; 1 with the first disagreement.
"""

import argparse
import base64
import gzip
import hashlib
import json
import os
import sys
import urllib.request

TILE_WIDTH = 256


def fail(msg):
    print(f"MISMATCH: {msg}")
    sys.exit(1)


def leaf_hash(data):
    return hashlib.sha256(b"\x00" + data).digest()


def node_hash(left, right):
    return hashlib.sha256(b"\x01" + left + right).digest()


def encode_index(n):
    groups = []
    while True:
        groups.append(n % 1000)
        n //= 1000
        if n == 0:
            break
    groups.reverse()
    return "/".join([f"x{g:03d}" for g in groups[:-1]] + [f"{groups[-1]:03d}"])


def tile_path(level, n, width):
    lvl = "entries" if level == "entries" else str(level)
    suffix = "" if width == TILE_WIDTH else f".p/{width}"
    return f"tile/{lvl}/{encode_index(n)}{suffix}"


class Source:
    def __init__(self, base, token=None):
        self.base = base.rstrip("/")
        self.http = base.startswith("http://") or base.startswith("https://")
        self.token = token
        self.fetches = 0

    def get(self, path, accept_gzip=True):
        self.fetches += 1
        if not self.http:
            with open(os.path.join(self.base, path), "rb") as f:
                return f.read()
        req = urllib.request.Request(f"{self.base}/{path}")
        if accept_gzip:
            req.add_header("Accept-Encoding", "gzip, identity")
        if self.token:
            req.add_header("Authorization", f"Bearer {self.token}")
        with urllib.request.urlopen(req, timeout=30) as r:
            body = r.read()
            if r.headers.get("Content-Encoding") == "gzip":
                body = gzip.decompress(body)
            return body


def parse_checkpoint(text):
    body, sep, _sigs = text.partition("\n\n")
    if not sep:
        fail("checkpoint has no signature block")
    lines = body.split("\n")
    if len(lines) < 3:
        fail("checkpoint body is shorter than three lines")
    origin, size, root = lines[0], int(lines[1]), base64.b64decode(lines[2], validate=True)
    if len(root) != 32 or str(size) != lines[1]:
        fail("checkpoint size or root malformed")
    return origin, size, root


class Tree:
    """The Merkle tree of `size` entries, read from tiles only."""

    def __init__(self, src, size):
        self.src = src
        self.size = size
        self.tiles = {}
        self.nodes = {}

    def tile(self, level, n):
        # The tile of this tree at (level, n): full, or the rightmost partial.
        have = self.size >> (8 * level)
        width = min(TILE_WIDTH, have - n * TILE_WIDTH)
        if width <= 0:
            fail(f"tile {level}/{n} is not in a tree of {self.size}")
        key = (level, n, width)
        if key not in self.tiles:
            data = self.src.get(tile_path(level, n, width))
            if len(data) != 32 * width:
                fail(f"{tile_path(level, n, width)} is {len(data)} bytes, expected {32 * width}")
            self.tiles[key] = [data[i * 32:(i + 1) * 32] for i in range(width)]
        return self.tiles[key]

    def node(self, height, index):
        # MTH(D[index * 2^height : (index + 1) * 2^height]) from tiles.
        key = (height, index)
        if key in self.nodes:
            return self.nodes[key]
        level, within = divmod(height, 8)
        first = index << within
        hashes = self.tile(level, first // TILE_WIDTH)
        start = first % TILE_WIDTH
        span = hashes[start:start + (1 << within)]
        if len(span) != 1 << within:
            fail(f"node {height}/{index} is not covered by its tile")
        while len(span) > 1:
            span = [node_hash(span[i], span[i + 1]) for i in range(0, len(span), 2)]
        self.nodes[key] = span[0]
        return span[0]

    def mth(self, lo, hi):
        n = hi - lo
        if n & (n - 1) == 0 and lo % n == 0:
            return self.node(n.bit_length() - 1, lo // n)
        k = 1 << ((n - 1).bit_length() - 1)
        return node_hash(self.mth(lo, lo + k), self.mth(lo + k, hi))

    def inclusion(self, m, lo, hi):
        n = hi - lo
        if n == 1:
            return []
        k = 1 << ((n - 1).bit_length() - 1)
        if m < k:
            return self.inclusion(m, lo, lo + k) + [self.mth(lo + k, hi)]
        return self.inclusion(m - k, lo + k, hi) + [self.mth(lo, lo + k)]

    def subproof(self, m, lo, hi, whole):
        n = hi - lo
        if m == n:
            return [] if whole else [self.mth(lo, hi)]
        k = 1 << ((n - 1).bit_length() - 1)
        if m <= k:
            return self.subproof(m, lo, lo + k, whole) + [self.mth(lo + k, hi)]
        return self.subproof(m - k, lo + k, hi, False) + [self.mth(lo, lo + k)]

    def consistency(self, m):
        if m == 0 or m == self.size:
            return []
        return self.subproof(m, 0, self.size, True)


def api_json(api, path, token):
    req = urllib.request.Request(f"{api.rstrip('/')}{path}")
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.loads(r.read())


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", required=True, help="tiles URL prefix or directory")
    ap.add_argument("--api", help="the ledger's base URL, to compare proofs and entries with")
    ap.add_argument("--token", help="read token")
    a = ap.parse_args()

    src = Source(a.base, a.token)
    origin, size, root = parse_checkpoint(src.get("checkpoint").decode())
    if size == 0:
        print("empty log")
        return
    tree = Tree(src, size)

    # Entries: every bundle's entries hash to the level-0 tile's hashes.
    leaves = []
    for n in range((size + TILE_WIDTH - 1) // TILE_WIDTH):
        width = min(TILE_WIDTH, size - n * TILE_WIDTH)
        data = src.get(tile_path("entries", n, width))
        entries = []
        while data:
            if len(data) < 2:
                fail(f"bundle {n} ends inside a length")
            ln = int.from_bytes(data[:2], "big")
            if len(data) < 2 + ln:
                fail(f"bundle {n} ends inside an entry")
            entries.append(data[2:2 + ln])
            data = data[2 + ln:]
        if len(entries) != width:
            fail(f"bundle {n} holds {len(entries)} entries, expected {width}")
        hashes = tree.tile(0, n)
        for i, e in enumerate(entries):
            if leaf_hash(e) != hashes[i]:
                fail(f"entry {n * TILE_WIDTH + i} does not hash to its level-0 tile hash")
        leaves.extend(entries)

    if tree.mth(0, size) != root:
        fail("the tree hash from tiles differs from the checkpoint's root")
    checked = {"entries": len(leaves), "inclusion": 0, "consistency": 0}

    if a.api:
        for i in range(size):
            e = api_json(a.api, f"/v1/entries/{i}", a.token)
            if base64.b64decode(e["leaf"]) != leaves[i]:
                fail(f"entry {i}: the bundle's bytes differ from the API's")
            p = api_json(a.api, f"/v1/proofs/inclusion?index={i}&tree_size={size}", a.token)
            mine = [h.hex() for h in tree.inclusion(i, 0, size)]
            if p["proof"] != mine or p["root"] != root.hex():
                fail(f"inclusion proof of {i} in {size}: tiles give {mine}, the API {p['proof']}")
            checked["inclusion"] += 1
        sizes = sorted({1, 2, 3, 7, 8, 255, 256, 257, 511, 512, 513, size // 2, size - 1, size})
        for m in [s for s in sizes if 1 <= s <= size]:
            p = api_json(a.api, f"/v1/proofs/consistency?first={m}&second={size}", a.token)
            mine = [h.hex() for h in tree.consistency(m)]
            if p["proof"] != mine:
                fail(f"consistency proof {m} -> {size}: tiles give {mine}, the API {p['proof']}")
            if p["first_root"] != tree.mth(0, m).hex():
                fail(f"root at {m}: tiles and the API differ")
            checked["consistency"] += 1

    print(
        f"OK {origin} size {size}: {checked['entries']} entries, "
        f"{checked['inclusion']} inclusion and {checked['consistency']} consistency proofs "
        f"rebuilt from {len(tree.tiles)} tiles ({src.fetches} fetches)"
    )


if __name__ == "__main__":
    main()
