"""The facts an instruction asks a draft to carry, and whether a text carries each.

From the instruction alone (the words typed in the draft box): times ("10am", "10:30", "3 p.m."), weekdays,
days said from today ("tomorrow", "next week"), dates and months, sums with a currency, percentages, ids and
codes (letters with digits, IBANs), email addresses, URLs, proper names (capitalised words that do not open a
sentence, less a stop list) and the other numbers. A text carries a fact when it states the same thing in any
of its usual spellings: "10am" is carried by "10 a.m." and "10:00 am", "£1,200" by "£1200" and "1,200
pounds", a code by itself with other spacing, case never counts.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import cache
from typing import Literal

FactKind = Literal[
    "url", "email", "money", "percent", "time", "date", "weekday", "day", "month", "code", "name", "number"
]

WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
MONTHS = (
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
)
# How a text may shorten a month ("Sept" as well as "Sep").
_MONTH_SHORT = {month: (month[:3], "sept") if month == "september" else (month[:3],) for month in MONTHS}
_SMALL_NUMBERS = (
    "zero",
    "one",
    "two",
    "three",
    "four",
    "five",
    "six",
    "seven",
    "eight",
    "nine",
    "ten",
    "eleven",
    "twelve",
)
_ORDINALS = (
    "",
    "first",
    "second",
    "third",
    "fourth",
    "fifth",
    "sixth",
    "seventh",
    "eighth",
    "ninth",
    "tenth",
    "eleventh",
    "twelfth",
)
# Capitalised words that are not names a draft must carry: greetings, titles, pronouns, and words an
# instruction capitalises for emphasis or by habit.
_NOT_NAMES_TEXT = """
i i'm i'll i've i'd dear hi hello hey thanks thank please ok okay yes no re fyi asap mr mrs ms miss dr prof sir
madam am pm a an the and or but if so as at by for from in of on to up with my our your their his her its we you
they he she it me us them this that these those there here best regards kind warm cheers sincerely yours love ps
tbc tba etc iban pdf faq eta rsvp
"""
NOT_NAMES = frozenset(_NOT_NAMES_TEXT.split())
_CURRENCY_SIGNS = "£€$¥₹"
_CURRENCY_WORDS = (
    r"(?:eur|euros?|usd|dollars?|gbp|pounds?|quid|chf|francs?|sek|nok|dkk|kronor|kroner|krona|yen|inr|rupees?|"
    r"pence|cents?)"
)
_NUMBER = r"\d{1,3}(?:[,.\u202f ]\d{3})+(?:[.,]\d{1,2})?|\d+(?:[.,]\d+)?"
_AMPM = r"(?:a\.?\s?m\.?|p\.?\s?m\.?)(?![a-z])"
_BEFORE = r"(?<![\w.,/@-])"  # not inside a word, a number or an address
_AFTER = r"(?![\w/@]|[.,]\d)"

_URL = re.compile(
    r"\b(?:https?://|www\.)[^\s<>\"']+|(?<![@\w.-])[a-z0-9-]+(?:\.[a-z0-9-]+)*\.(?:com|org|net|io|co\.uk|org\.uk|"
    r"ac\.uk|gov\.uk|uk|de|fr|nl|ie|eu|dev|app|info|biz)(?:/[^\s<>\"']*)?(?![\w-]|\.\w)",
    re.IGNORECASE,
)
_EMAIL = re.compile(r"\b[\w.+-]+@[\w-]+(?:\.[\w-]+)+\b")
_MONEY = re.compile(
    rf"(?:[{_CURRENCY_SIGNS}]|\b(?:eur|usd|gbp|chf)\s?)(?P<a>{_NUMBER})\s?(?P<k>k|m|bn)?(?![\w])"
    rf"|{_BEFORE}(?P<b>{_NUMBER})\s?(?P<k2>k|m|bn)?\s?(?:{_CURRENCY_WORDS}|[{_CURRENCY_SIGNS}])(?![\w])",
    re.IGNORECASE,
)
_PERCENT = re.compile(rf"{_BEFORE}(?P<n>{_NUMBER})\s?(?:%|percent\b|per cent\b)", re.IGNORECASE)
_TIME = re.compile(
    rf"{_BEFORE}(?P<h>\d{{1,2}})(?:[:.](?P<m>\d{{2}}))?\s?(?P<ampm>{_AMPM})"
    rf"|{_BEFORE}(?P<h24>\d{{1,2}})[:h](?P<m24>\d{{2}}){_AFTER}"
    rf"|{_BEFORE}(?P<hoc>\d{{1,2}})\s?o'?\s?clock\b"
    r"|\b(?P<word>noon|midday|midnight)\b",
    re.IGNORECASE,
)
_MONTH_NAME = r"(?P<{}>" + "|".join(rf"{m}|{m[:3]}\.?" for m in MONTHS) + r"|sept\.?)"
_DATE = re.compile(
    rf"{_BEFORE}(?P<d1>\d{{1,2}})(?:st|nd|rd|th)?(?:\s+of)?\s+{_MONTH_NAME.format('m1')}(?![a-z])"
    rf"|\b{_MONTH_NAME.format('m2')}\s+(?:the\s+)?(?P<d2>\d{{1,2}})(?:st|nd|rd|th)?(?![\d:])"
    rf"|{_BEFORE}(?P<y>\d{{4}})-(?P<mm>\d{{1,2}})-(?P<dd>\d{{1,2}}){_AFTER}"
    rf"|{_BEFORE}(?P<n1>\d{{1,2}})[/.](?P<n2>\d{{1,2}})(?:[/.](?P<n3>\d{{2,4}}))?{_AFTER}",
    re.IGNORECASE,
)
_WEEKDAY = re.compile(r"\b(?P<w>" + "|".join(WEEKDAYS) + r")s?\b", re.IGNORECASE)
# Capitalised, as a name is ("may" is a verb, "march" one too).
# A day said from today: "tomorrow", "this evening", "next week".
_RELATIVE_DAY = re.compile(
    r"\b(?:the day after tomorrow|today|tonight|tomorrow|this (?:morning|afternoon|evening|weekend|week)|"
    r"next (?:week|weekend|month))\b",
    re.IGNORECASE,
)
_MONTH = re.compile(r"\b(?P<m>" + "|".join(month.capitalize() for month in MONTHS) + r")\b")
_IBAN = re.compile(r"\b[A-Z]{2}\d{2}(?:[ ]?[A-Z0-9]{4}){2,7}(?:[ ]?[A-Z0-9]{1,3})?\b")
_CODE = re.compile(r"(?<![\w@./-])#?(?=[\w-]*\d)(?=[\w-]*[A-Za-z])[A-Za-z0-9]+(?:-[A-Za-z0-9]+)*(?![\w@-]|\.\w)")
_ORDINAL = re.compile(r"(?P<n>\d{1,2})(?:st|nd|rd|th)", re.IGNORECASE)
_PLAIN_NUMBER = re.compile(rf"{_BEFORE}#?(?P<n>{_NUMBER}){_AFTER}")
_WORD = re.compile(r"[A-Za-z][A-Za-z'\u2019-]*")
_TOKEN = re.compile(r"[\w'\u2019-]+")
_CALENDAR_WORDS = frozenset(WEEKDAYS) | frozenset(MONTHS)
_SENTENCE_END = re.compile(r"[.!?:;\n\"\u201c(]\s*$|^\s*$")


@dataclass(frozen=True)
class AskedFact:
    """One fact the instruction asks for: its kind, and as the instruction says it."""

    kind: FactKind
    said: str

    def carried_by(self, text: str) -> bool:
        """Whether `text` states this fact, in any of its usual spellings."""
        return _CARRIERS[self.kind](self.said, text)


def asked_facts(instruction: str) -> tuple[AskedFact, ...]:
    """The facts `instruction` asks a draft to carry, in the order it says them, each once."""
    claimed: list[tuple[int, int]] = []
    found: list[tuple[int, AskedFact]] = []

    def take(kind: FactKind, pattern: re.Pattern[str], accept: Callable[[re.Match[str]], bool] | None = None) -> None:
        for match in pattern.finditer(instruction):
            start, end = match.span()
            if any(start < e and s < end for s, e in claimed) or (accept is not None and not accept(match)):
                continue
            claimed.append((start, end))
            found.append((start, AskedFact(kind, match.group(0).strip().rstrip(".,;:!?)"))))

    take("email", _EMAIL)
    take("url", _URL)
    take("time", _TIME)
    take("money", _MONEY)
    take("percent", _PERCENT)
    take("date", _DATE, _real_date)
    take("weekday", _WEEKDAY)
    take("day", _RELATIVE_DAY)
    take("month", _MONTH)
    take("code", _IBAN)
    take("code", _CODE, lambda match: not _ORDINAL.fullmatch(match.group(0)))
    take("number", _ORDINAL)
    take("number", _PLAIN_NUMBER)
    for start, end, name in _names(instruction):
        if not any(start < e and s < end for s, e in claimed):
            claimed.append((start, end))
            found.append((start, AskedFact("name", name)))
    unique: dict[tuple[FactKind, str], AskedFact] = {}
    for _, fact in sorted(found, key=lambda item: item[0]):
        unique.setdefault((fact.kind, _key(fact)), fact)
    return tuple(unique.values())


def missing_facts(text: str, facts: Iterable[AskedFact]) -> tuple[AskedFact, ...]:
    """The facts `text` does not carry."""
    return tuple(fact for fact in facts if not fact.carried_by(text))


def _key(fact: AskedFact) -> str:
    return " ".join(fact.said.lower().split())


def _real_date(match: re.Match[str]) -> bool:
    """A numeric date that can be one (day and month at most 31 and 12 in either order), not a ratio."""
    if match.group("n1") is None:
        return True
    first, second = int(match.group("n1")), int(match.group("n2"))
    return 1 <= first <= 31 and 1 <= second <= 31 and min(first, second) <= 12 and match.group("n3") is not None


def _names(instruction: str) -> list[tuple[int, int, str]]:
    """Runs of capitalised words that do not open a sentence and are not in the stop list (less a
    possessive "'s"), with their span."""
    runs: list[tuple[int, int, str]] = []
    current: list[tuple[int, int, str]] = []

    def close() -> None:
        if current:
            runs.append((current[0][0], current[-1][1], " ".join(word for _, _, word in current)))
            current.clear()

    for match in _TOKEN.finditer(instruction):
        if not _WORD.fullmatch(match.group(0)):  # a number or a code ends a name
            close()
            continue
        word = re.sub(r"['\u2019]s$", "", match.group(0).rstrip("'\u2019-"))
        if current and instruction[current[-1][1] : match.start()].strip(" "):
            close()
        plain = word.lower()
        opens_sentence = bool(_SENTENCE_END.search(instruction[: match.start()]))
        if word[0].isupper() and not opens_sentence and plain not in NOT_NAMES | _CALENDAR_WORDS:
            current.append((match.start(), match.start() + len(word), word))
        else:
            close()
    close()
    return runs


# ----- how a text carries each kind of fact --------------------------------------------------------------


def _amount(number: str) -> float | None:
    """A written number's value: thousands separators (",", ".", thin space) left out, a decimal comma read."""
    compact = number.replace("\u202f", "").replace(" ", "")
    if re.fullmatch(r"\d{1,3}(?:[,.]\d{3})+", compact):
        return float(re.sub(r"[,.]", "", compact))
    if re.fullmatch(r"\d{1,3}(?:,\d{3})+\.\d{1,2}", compact):
        return float(compact.replace(",", ""))
    if re.fullmatch(r"\d{1,3}(?:\.\d{3})+,\d{1,2}", compact):
        return float(compact.replace(".", "").replace(",", "."))
    try:
        return float(compact.replace(",", "."))
    except ValueError:
        return None


_SCALES = {"k": 1e3, "m": 1e6, "bn": 1e9}


def _money_values(text: str) -> set[float]:
    values: set[float] = set()
    for match in _MONEY.finditer(text):
        number, scale = (
            (match.group("a"), match.group("k")) if match.group("a") else (match.group("b"), match.group("k2"))
        )
        value = _amount(number)
        if value is not None:
            values.add(value * _SCALES.get((scale or "").lower(), 1.0))
    return values


def _number_values(text: str) -> set[float]:
    values = {value for m in _PLAIN_NUMBER.finditer(text) if (value := _amount(m.group("n"))) is not None}
    words = {word.lower() for word in _WORD.findall(text)}
    values |= {float(i) for i, word in enumerate(_SMALL_NUMBERS) if word in words}
    values |= {float(i) for i, word in enumerate(_ORDINALS) if word and word in words}
    values |= {float(m.group("n")) for m in _ORDINAL.finditer(text)}
    return values


def _carries_money(said: str, text: str) -> bool:
    asked = _money_values(said)
    return bool(asked) and bool(asked & (_money_values(text) | _number_values(text)))


def _carries_percent(said: str, text: str) -> bool:
    asked = {_amount(m.group("n")) for m in _PERCENT.finditer(said)}
    return bool(asked & {_amount(m.group("n")) for m in _PERCENT.finditer(text)})


def _minutes(match: re.Match[str]) -> set[int]:
    """The times of day (minutes after midnight) a time expression may mean."""
    word = (match.group("word") or "").lower()
    if word:
        return {0} if word == "midnight" else {12 * 60}
    if match.group("h") is not None:
        hour, minute = int(match.group("h")), int(match.group("m") or 0)
        if hour > 12 or minute > 59:
            return set()
        afternoon = match.group("ampm").lower().startswith("p")
        return {(hour % 12 + (12 if afternoon else 0)) * 60 + minute}
    if match.group("h24") is not None:
        hour, minute = int(match.group("h24")), int(match.group("m24"))
        if hour > 23 or minute > 59:
            return set()
        return {hour * 60 + minute} | ({(hour + 12) * 60 + minute} if 1 <= hour < 12 else set())
    hour = int(match.group("hoc"))
    return {hour % 12 * 60, (hour % 12 + 12) * 60} if hour <= 12 else set()


def _times(text: str) -> set[int]:
    return {minute for match in _TIME.finditer(text) for minute in _minutes(match)}


def _carries_time(said: str, text: str) -> bool:
    return bool(_times(said) & _times(text))


def _month_number(name: str) -> int:
    plain = name.lower().rstrip(".")
    return next(i for i, month in enumerate(MONTHS, 1) if plain == month or plain in _MONTH_SHORT[month])


def _dates(text: str) -> set[tuple[int, int]]:
    """The (day, month) pairs a text's dates may mean (a numeric date either way round)."""
    dates: set[tuple[int, int]] = set()
    for match in _DATE.finditer(text):
        if match.group("d1"):
            dates.add((int(match.group("d1")), _month_number(match.group("m1"))))
        elif match.group("d2"):
            dates.add((int(match.group("d2")), _month_number(match.group("m2"))))
        elif match.group("y"):
            dates.add((int(match.group("dd")), int(match.group("mm"))))
        else:
            first, second = int(match.group("n1")), int(match.group("n2"))
            dates |= {(first, second), (second, first)}
    return dates


def _carries_date(said: str, text: str) -> bool:
    return bool(_dates(said) & _dates(text))


# How a text may shorten a weekday, capitalised ("Sat" and "Sun" as well as "sat" and "sun" are words).
_WEEKDAY_SHORT = {
    day: {"tuesday": ("Tue", "Tues"), "thursday": ("Thu", "Thur", "Thurs")}.get(day, (day[:3].title(),))
    for day in WEEKDAYS
}


def _carries_weekday(said: str, text: str) -> bool:
    day = said.lower() if said.lower() in WEEKDAYS else said.lower().rstrip("s")
    if any(match.group("w").lower() == day for match in _WEEKDAY.finditer(text)):
        return True
    return any(re.search(rf"\b{short}\b\.?", text) for short in _WEEKDAY_SHORT.get(day, ()))


@cache
def _month_pattern(month: str) -> re.Pattern[str]:
    """The month capitalised, in full or short ("may" and "march" are also verbs)."""
    spellings = (month.title(), *(rf"{short.title()}\.?" for short in _MONTH_SHORT[month]))
    return re.compile(r"\b(?:" + "|".join(spellings) + r")(?![a-z])")


def _carries_month(said: str, text: str) -> bool:
    month = said.lower()
    return bool(_month_pattern(month).search(text)) or any(m == MONTHS.index(month) + 1 for _, m in _dates(text))


def _compact(text: str) -> str:
    return re.sub(r"[\s\-#]", "", text).lower()


def _carries_code(said: str, text: str) -> bool:
    """The code's letters and digits in order, any spacing or hyphens between them, not inside a longer code."""
    body = r"[\s-]?".join(re.escape(char) for char in _compact(said))
    return bool(re.search(rf"(?<![a-z0-9]){body}(?![a-z0-9])", text.lower()))


def _carries_number(said: str, text: str) -> bool:
    ordinal = _ORDINAL.fullmatch(said)
    asked = float(ordinal.group("n")) if ordinal else _amount(said.lstrip("#"))
    return asked is not None and asked in _number_values(text)


def _carries_words(said: str, text: str) -> bool:
    """Each word of the name (or address), case aside, not inside a longer word."""
    lowered = text.lower().replace("\u2019", "'")
    return all(
        re.search(rf"(?<![\w]){re.escape(word)}(?![\w])", lowered)
        for word in said.lower().replace("\u2019", "'").split()
    )


def _carries_address(said: str, text: str) -> bool:
    """A URL or email address as written, case aside, with or without its scheme or a trailing slash."""
    bare = re.sub(r"^(?:https?://)?(?:www\.)?", "", said.lower()).rstrip("/")
    return bare in text.lower()


_CARRIERS: dict[FactKind, Callable[[str, str], bool]] = {
    "url": _carries_address,
    "email": _carries_address,
    "money": _carries_money,
    "percent": _carries_percent,
    "time": _carries_time,
    "date": _carries_date,
    "weekday": _carries_weekday,
    "day": _carries_words,
    "month": _carries_month,
    "code": _carries_code,
    "name": _carries_words,
    "number": _carries_number,
}
