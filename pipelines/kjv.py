"""The King James Bible corpus's protocol (`benchmarks.kjv_corpus` writes it from Debian's `bible-kjv`): the
`bible` program's text read as chapters of verses, the tokens of a verse, and the split of a chapter."""

import re

TOKEN = re.compile(r"[A-Za-z]+(?:'[A-Za-z]+)*|[0-9]+|[^\sA-Za-z0-9]")
VERSE = re.compile(r"^\s+\d+ (.*)$")


def chapters(text: str) -> list[list[str]]:
    """The program's text as chapters of verses (each verse's wrapped lines joined): a heading after a blank
    line (`Genesis 1`) opens a chapter; a line that starts with spaces and a number opens a verse."""
    result, verse, after_blank = [], None, True
    for line in text.splitlines():
        match = VERSE.match(line)
        if not line.strip():
            after_blank = True
            continue
        if match and result:
            result[-1].append(match.group(1).strip())
            verse = len(result[-1]) - 1
        elif after_blank:  # a heading
            result.append([])
            verse = None
        elif verse is not None:
            result[-1][verse] += " " + line.strip()
        after_blank = False
    return result


def tokens(verse: str) -> str:
    return " ".join(TOKEN.findall(verse))


def split_of(chapter: int) -> str:
    return {18: "valid", 19: "test"}.get(chapter % 20, "train")
