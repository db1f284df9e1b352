"""Rebuild the compact public question sets of this folder from the raw files, deterministically.

Every item keeps only what the benchmarks read: its ID, its split, the question, its passage
(the gold passage, or for an unanswerable item the on-topic passage that does not answer),
its answers and the IDs of the other items whose passages a BM25 retriever ranks nearest
(``bm25s`` over the set's distinct passages, the question as the query; the item's own
passage, and any other with the same text, left out). The split is made once, by a stable
hash of the item's ID: ``tune`` when the SHA-256 of the ID is even, else ``report``. Items are
written in the order of that hash, so the first N of a file are a stable sample.

The raw files, each from a repository snapshot (``README.md`` here names the licences)::

    nq-open-oracle.jsonl.gz        nelson-liu/lost-in-the-middle  qa_data/nq-open-oracle.jsonl.gz
    clapnq_dev_answerable.jsonl    primeqa/clapnq  annotated_data/dev/clapnq_dev_answerable.jsonl
    clapnq_dev_unanswerable.jsonl  primeqa/clapnq  annotated_data/dev/clapnq_dev_unanswerable.jsonl
    xquad.<lang>.json              deepmind/xquad  xquad.<lang>.json
    squad2-dev-v2.0.json           chrischute/squad  data/dev-v2.0.json
    boolq-test_data.jsonl          shaggyday/evaluating-human-rationales  data/boolq/test_data.jsonl
    hotpotqa-rpt-<part>.jsonl      megagonlabs/RPT at 693b411  data/hotpotqa/<part>.jsonl
                                   (<part>: dev, test, train)
    tatqa_dataset_dev.json         NExTplusplus/TAT-QA  dataset_raw/tatqa_dataset_dev.json
    tatqa_dataset_test_gold.json   NExTplusplus/TAT-QA  dataset_raw/tatqa_dataset_test_gold.json

The held-out sets (SQuAD 2.0, BoolQ, HotpotQA, TAT-QA) are one split, ``heldout``. A sample
of a held-out set is its items of lowest ID hash: the first N in the stable order.

Run from the workspace root: ``uv run python benchmarks/data/public/make_sets.py [--raw DIR]
[--sets NAME,...]`` (default ``/tmp/pub``, every set).
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import bm25s  # type: ignore[import-untyped]

HERE = Path(__file__).parent
# The XQuAD languages kept: one per script family the checks treat differently (Latin,
# Cyrillic, Han, Arabic, Devanagari), and English, the same questions untranslated.
XQUAD_LANGUAGES = ("en", "de", "es", "ru", "zh", "ar", "hi")
# BM25 neighbours kept per item: the most any configuration sends.
NEIGHBOURS = 9
# Items kept of the held-out sets sampled: about a thousand short passages, and as many
# multi-hop questions as keep the file (two gold paragraphs and eight distractors each)
# under a megabyte compressed.
BOOLQ_ITEMS = 1000
HOTPOTQA_ITEMS = 400
YES_NO = ("yes", "no")


def digest(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def split_of(key: str) -> str:
    """``tune`` or ``report``, once and for all, by the parity of the key's SHA-256."""
    return "tune" if int(digest(key), 16) % 2 == 0 else "report"


def tokens(texts: Sequence[str], language: str) -> Any:
    """``bm25s`` tokens: English stop words dropped; Chinese (no spaces) by character."""
    if language == "zh":
        return bm25s.tokenize(
            list(texts), token_pattern=r"(?u)\w", stopwords=None, show_progress=False
        )
    stopwords = "en" if language == "en" else None
    return bm25s.tokenize(list(texts), stopwords=stopwords, show_progress=False)


def add_neighbours(items: list[dict[str, Any]], language: str) -> None:
    """Give each item the IDs of the items whose passages BM25 ranks nearest its question.

    The index holds each distinct passage once (its first item stands for it); ties in score
    keep the passages' order, so the result does not depend on the sort's stability.
    """
    first: dict[str, str] = {}
    for item in items:
        first.setdefault(item["text"], item["id"])
    passages = list(first)
    retriever = bm25s.BM25()
    retriever.index(tokens(passages, language), show_progress=False)
    vocabulary = set(retriever.vocab_dict)
    queries = tokens([item["question"] for item in items], language)
    words = {index: word for word, index in queries.vocab.items()}
    for item, ids in zip(items, queries.ids, strict=True):
        query = [words[i] for i in ids if words[i] in vocabulary]
        scores = retriever.get_scores(query) if query else [0.0] * len(passages)
        ranked = sorted(range(len(passages)), key=lambda n: (-float(scores[n]), n))
        item["neighbours"] = [first[passages[n]] for n in ranked if passages[n] != item["text"]][
            :NEIGHBOURS
        ]


def ordered(items: Iterable[dict[str, Any]], key: str = "id") -> list[dict[str, Any]]:
    return sorted(items, key=lambda item: digest(item[key]))


def nq_open(raw: Path) -> list[dict[str, Any]]:
    """NQ-open with its gold passages: the question, the answers and ``ctxs[0]``."""
    items = []
    with gzip.open(raw / "nq-open-oracle.jsonl.gz", "rt", encoding="utf-8") as lines:
        for number, line in enumerate(lines):
            row = json.loads(line)
            gold = row["ctxs"][0]
            item_id = f"nq-{number:04d}"
            items.append(
                {
                    "id": item_id,
                    "split": split_of(item_id),
                    "question": row["question"],
                    "answers": row["answers"],
                    "title": gold["title"],
                    "text": gold["text"],
                }
            )
    add_neighbours(items, "en")
    return ordered(items)


def clapnq(raw: Path) -> list[dict[str, Any]]:
    """ClapNQ dev: 300 answerable and 300 unanswerable questions, one passage each."""
    items = []
    for name, answerable in (("answerable", True), ("unanswerable", False)):
        path = raw / f"clapnq_dev_{name}.jsonl"
        for line in path.read_text(encoding="utf-8").splitlines():
            row = json.loads(line)
            passage = row["passages"][0]
            output = row["output"][0]
            items.append(
                {
                    "id": row["id"],
                    "split": split_of(row["id"]),
                    "question": row["input"],
                    "answerable": answerable,
                    "title": passage["title"],
                    "text": passage["text"],
                    "answer": output["answer"] if answerable else None,
                    "selected": output.get("selected_sentences", []) if answerable else [],
                }
            )
    add_neighbours(items, "en")
    return ordered(items)


def squad_items(
    path: Path, prefix: str, *, skip: Iterable[str] = ()
) -> list[tuple[str, dict[str, Any]]]:
    """Every question of a SQuAD-format file as (paragraph context, item)."""
    skipped = set(skip)
    data = json.loads(path.read_text(encoding="utf-8"))["data"]
    found = []
    for article in data:
        for paragraph in article["paragraphs"]:
            context = paragraph["context"]
            if context in skipped:
                continue
            for qa in paragraph["qas"]:
                answers = qa["answers"]
                found.append(
                    (
                        context,
                        {
                            "id": f"{prefix}{qa['id']}",
                            "split": split_of(qa["id"]),
                            "question": qa["question"],
                            "answerable": not qa.get("is_impossible", False),
                            "title": article["title"].replace("_", " "),
                            "text": context,
                            "answers": [answer["text"] for answer in answers],
                            "answer_start": answers[0]["answer_start"] if answers else None,
                        },
                    )
                )
    return found


def one_per_paragraph(
    found: list[tuple[str, dict[str, Any]]], key: str, *, answerable: bool
) -> list[dict[str, Any]]:
    """Of each paragraph's questions of one kind, the one whose key hashes lowest."""
    chosen: dict[str, dict[str, Any]] = {}
    for context, item in found:
        if item["answerable"] is not answerable:
            continue
        held = chosen.get(context)
        if held is None or digest(item[key]) < digest(held[key]):
            chosen[context] = item
    return list(chosen.values())


def xquad(raw: Path) -> list[dict[str, Any]]:
    """XQuAD: the same question of each of its 240 paragraphs in each kept language.

    One question per paragraph (the one whose original ID hashes lowest, so every language
    has the same questions), to keep the run short; the split follows the original ID too.
    """
    items = []
    for language in XQUAD_LANGUAGES:
        found = squad_items(raw / f"xquad.{language}.json", f"{language}:")
        for _, item in found:
            item["qid"] = item["id"].split(":", 1)[1]
        kept = one_per_paragraph(found, "qid", answerable=True)
        for item in kept:
            item["lang"] = language
            del item["answerable"]
        add_neighbours(kept, language)
        items.extend(ordered(kept, key="qid"))
    for item in items:
        del item["qid"]
    return items


def squad2_heldout(raw: Path) -> list[dict[str, Any]]:
    """SQuAD 2.0, held out: one answerable and one unanswerable question per paragraph.

    From the dev file chrischute/squad publishes (16 articles of the official dev set);
    paragraphs that XQuAD also holds are left out.
    """
    english = json.loads((raw / "xquad.en.json").read_text(encoding="utf-8"))["data"]
    xquad_contexts = {p["context"] for article in english for p in article["paragraphs"]}
    found = squad_items(raw / "squad2-dev-v2.0.json", "squad2-", skip=xquad_contexts)
    items = one_per_paragraph(found, "id", answerable=True)
    items += one_per_paragraph(found, "id", answerable=False)
    for item in items:
        item["split"] = "heldout"
    add_neighbours(items, "en")
    return ordered(items)


def heldout_sample(items: list[dict[str, Any]], count: int | None = None) -> list[dict[str, Any]]:
    """The ``count`` items of lowest ID hash (all by default), split ``heldout``, neighboured."""
    kept = ordered(items)[:count]
    for item in kept:
        item["split"] = "heldout"
    add_neighbours(kept, "en")
    return kept


def boolq(raw: Path) -> list[dict[str, Any]]:
    """BoolQ dev, held out: natural yes/no queries, each with its Wikipedia passage.

    From the copy ERASER's BoolQ test split keeps of it, whose evidence text is BoolQ's own
    passage, as BoolQ ships it (the 2,817 of BoolQ's 3,270 dev questions ERASER kept). BoolQ
    marks no sentence of the passage as the one its answer rests on, and names no title here.
    """
    items = []
    lines = (raw / "boolq-test_data.jsonl").read_text(encoding="utf-8").splitlines()
    for line in lines:
        row = json.loads(line)
        (evidence,) = row["evidences"]
        answer = "yes" if row["classification"] == "True" else "no"
        items.append(
            {
                "id": f"boolq-{row['annotation_id']}",
                "question": row["query"],
                "title": "",
                "text": evidence["text"],
                "answers": [answer],
                "answer": answer,
                "yes_no": True,
            }
        )
    return heldout_sample(items, BOOLQ_ITEMS)


def hotpotqa_item(row: dict[str, Any]) -> dict[str, Any]:
    """One HotpotQA question: its two gold paragraphs as one passage, its distractors apart.

    The gold paragraphs are those holding a supporting fact, in the order the set lists
    them, each its sentences joined as the set writes them, a blank line between the two.
    """
    context = row["context"]
    paragraphs = dict(zip(context["title"], context["sentences"], strict=True))
    facts = list(
        zip(row["supporting_facts"]["title"], row["supporting_facts"]["sent_id"], strict=True)
    )
    gold = [title for title in context["title"] if title in {title for title, _ in facts}]
    text = "\n\n".join("".join(paragraphs[title]) for title in gold)
    answer = row["answer"]
    item: dict[str, Any] = {
        "id": f"hotpotqa-{row['id']}",
        "question": row["question"],
        "title": " / ".join(gold),
        "titles": gold,
        "text": text,
        "answers": [answer],
        "answer": answer,
        "selected": [paragraphs[title][index].strip() for title, index in facts],
        "distractors": [
            [title, "".join(paragraphs[title])] for title in context["title"] if title not in gold
        ],
    }
    if answer in YES_NO:
        item["yes_no"] = True
    else:
        item["answer_start"] = answer_start(text, answer, item["selected"])
    return item


def answer_start(text: str, answer: str, where: Sequence[str]) -> int | None:
    """Where ``answer`` first stands as whole words in one of the ``where`` excerpts, else anywhere.

    Exactly as the set writes it: an answer the text holds only in another case has none.
    """
    before = r"(?<!\w)" if re.match(r"\w", answer) else ""
    after = r"(?!\w)" if re.search(r"\w$", answer) else ""
    pattern = re.compile(before + re.escape(answer) + after)
    for excerpt in where:
        at = text.find(excerpt)
        found = pattern.search(text, at, at + len(excerpt)) if at >= 0 else None
        if found is not None:
            return found.start()
    found = pattern.search(text)
    return None if found is None else found.start()


def hotpotqa(raw: Path) -> list[dict[str, Any]]:
    """HotpotQA dev (distractor setting), held out: 400 of the 1,100 questions RPT kept.

    megagonlabs/RPT committed 1,100 questions of HotpotQA's dev set (all of level ``hard``,
    as every dev question is) in three files, then removed them; they are read at the last
    commit that holds them, after the repository's licence was added.
    """
    rows = [
        json.loads(line)
        for part in ("dev", "test", "train")
        for line in (raw / f"hotpotqa-rpt-{part}.jsonl").read_text(encoding="utf-8").splitlines()
    ]
    return heldout_sample([hotpotqa_item(row) for row in rows], HOTPOTQA_ITEMS)


def tatqa(raw: Path) -> list[dict[str, Any]]:
    """TAT-QA dev and test, held out: every question answered by one span of the text.

    The passage is the excerpt's paragraphs (never its table), a blank line between them;
    the answer's place is its first as whole words in the paragraph TAT-QA names as the one
    it rests on, else in the excerpt.
    """
    items = []
    for name in ("tatqa_dataset_dev.json", "tatqa_dataset_test_gold.json"):
        for context in json.loads((raw / name).read_text(encoding="utf-8")):
            paragraphs = sorted(context["paragraphs"], key=lambda paragraph: paragraph["order"])
            text = "\n\n".join(paragraph["text"] for paragraph in paragraphs)
            for question in context["questions"]:
                if question["answer_type"] != "span" or question["answer_from"] != "text":
                    continue
                (answer,) = question["answer"]
                relevant = [
                    p["text"] for p in paragraphs if str(p["order"]) in question["rel_paragraphs"]
                ]
                items.append(
                    {
                        "id": f"tatqa-{question['uid']}",
                        "question": question["question"],
                        "title": "",
                        "text": text,
                        "answers": [answer],
                        "answer_start": answer_start(text, answer, relevant),
                    }
                )
    return heldout_sample(items)


SETS = {
    "nq-open": nq_open,
    "clapnq": clapnq,
    "xquad": xquad,
    "squad2-heldout": squad2_heldout,
    "boolq-heldout": boolq,
    "hotpotqa-heldout": hotpotqa,
    "tatqa-heldout": tatqa,
}
"""Every file by name, and what builds it from the raw files."""


def write(name: str, items: list[dict[str, Any]]) -> None:
    path = HERE / f"{name}.jsonl.gz"
    body = "".join(json.dumps(item, ensure_ascii=False, sort_keys=True) + "\n" for item in items)
    # mtime=0: the same items give the same bytes.
    with path.open("wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as out:
        out.write(body.encode("utf-8"))
    print(f"{path.name}: {len(items)} items")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--raw", type=Path, default=Path("/tmp/pub"), help="the raw files")
    parser.add_argument(
        "--sets", default=",".join(SETS), help="the files to build, by name (default: every one)"
    )
    args = parser.parse_args(argv)
    names = args.sets.split(",")
    unknown = sorted(set(names) - set(SETS))
    if unknown:
        parser.error(f"no set named {', '.join(unknown)}; choose from {', '.join(SETS)}")
    for name in names:
        write(name, SETS[name](args.raw))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
