#!/usr/bin/env python3
"""Writes a deterministic Markdown corpus for bench/search.sh and prints its query set.

Usage: search_corpus.py DIR COUNT SEED

Each file is a `#` title and seven `##` sections of three to six lines. Words are drawn from a
Zipf distribution over 6,000 synthetic words (so a few are in most sections and most are rare),
mixed with English function words; one file in twenty has a line of Chinese. Prints one JSON
object: the number of files and sections, and the queries the benchmark rotates through (common
words, rare words, two-term queries and a CJK phrase).
"""

import json
import os
import random
import sys

FUNCTION_WORDS = "the and of to in is for on with as by at from that this it be are was".split()
SYLLABLES = "ka lo mi ne ru ta vo si pe da gu ri mo la zen tor bel fin dus par".split()
CHINESE = ["知识库搜索使用全文索引", "部署流程需要审批", "数据库备份每天执行", "服务监控和告警规则"]


def vocabulary(rng, size):
    words = set()
    while len(words) < size:
        words.add("".join(rng.choice(SYLLABLES) for _ in range(rng.randint(2, 4))))
    return sorted(words)


def main():
    root, count, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    rng = random.Random(seed)
    words = vocabulary(random.Random(1), 6000)
    # Zipf weights: rank r has weight 1 / r.
    weights = [1.0 / (rank + 1) for rank in range(len(words))]
    cumulative = []
    total = 0.0
    for weight in weights:
        total += weight
        cumulative.append(total)

    def line(n):
        drawn = rng.choices(words, cum_weights=cumulative, k=n)
        out = []
        for word in drawn:
            out.append(word)
            if rng.random() < 0.4:
                out.append(rng.choice(FUNCTION_WORDS))
        return " ".join(out).capitalize() + "."

    sections = 0
    for index in range(count):
        directory = os.path.join(root, f"d{index // 500:02d}")
        os.makedirs(directory, exist_ok=True)
        parts = [f"# {line(3)[:-1]}", "", line(10), ""]
        for _ in range(7):
            parts.append(f"## {line(2)[:-1]}")
            for _ in range(rng.randint(3, 6)):
                parts.append(line(rng.randint(8, 16)))
            if index % 20 == 0 and rng.random() < 0.3:
                parts.append(rng.choice(CHINESE))
            parts.append("")
        sections += 8
        with open(os.path.join(directory, f"note-{index:05d}.md"), "w", encoding="utf-8") as f:
            f.write("\n".join(parts))
    queries = {
        "common": ["the", words[0], f"{words[0]} {words[1]}"],
        "rare": [words[4000], words[5999]],
        "two_term": [f"{words[50]} {words[400]}", f"{words[10]} {words[2500]}"],
        "cjk": ["全文索引"],
    }
    print(json.dumps({"files": count, "sections": sections, "queries": queries}))


if __name__ == "__main__":
    main()
