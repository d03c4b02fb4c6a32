"""A procedurally generated, offline knowledge base of fictional entities and relations.

Every research problem carries its own small world: people, cities, countries, companies
and universities with invented names (so a model cannot answer from memory and must use
the tools), linked by functional relations (each entity has exactly one value per
relation of its type, so every chain of relations has exactly one answer):

=====================  ============  ============  ===========================================
relation               from          to            sub-question that asks for it (one hop)
=====================  ============  ============  ===========================================
``born_in``            person        city          In which city was {e} born?
``works_for``          person        company       Which company does {e} work for?
``studied_at``         person        university    At which university did {e} study?
``headquartered_in``   company       city          In which city is {e} headquartered?
``founded_by``         company       person        Who founded {e}?
``located_in``         university    city          In which city is {e} located?
``country``            city          country       In which country is {e}?
``capital``            country       city          What is the capital of {e}?
=====================  ============  ============  ===========================================

Questions follow templates that compose two or three relations ("In which country was
{e} born?" is ``born_in`` then ``country``). :func:`interpret` reads any question (a
template, a one-hop sub-question, or a model's own phrasing) as *an entity named in it
plus the relations its keywords name*, composed in the only order that type-checks; it is
how the environment checks a sub-agent's report against the sub-question it was given.
"""

from __future__ import annotations

import difflib
import itertools
import random
import re
from dataclasses import dataclass, field

ENTITY_TYPES = ("person", "city", "country", "company", "university")

#: relation -> (from type, to type)
RELATIONS: dict[str, tuple[str, str]] = {
    "born_in": ("person", "city"),
    "works_for": ("person", "company"),
    "studied_at": ("person", "university"),
    "headquartered_in": ("company", "city"),
    "founded_by": ("company", "person"),
    "located_in": ("university", "city"),
    "country": ("city", "country"),
    "capital": ("country", "city"),
}

#: The canonical one-hop sub-question per relation (what the scripted main agent delegates).
HOP_QUESTIONS: dict[str, str] = {
    "born_in": "In which city was {e} born?",
    "works_for": "Which company does {e} work for?",
    "studied_at": "At which university did {e} study?",
    "headquartered_in": "In which city is {e} headquartered?",
    "founded_by": "Who founded {e}?",
    "located_in": "In which city is {e} located?",
    "country": "In which country is {e}?",
    "capital": "What is the capital of {e}?",
}

#: Words that name a relation in free text. Matching is by word start, case-insensitive.
RELATION_KEYWORDS: dict[str, re.Pattern[str]] = {
    "born_in": re.compile(r"\b(born|birth)", re.I),
    "works_for": re.compile(r"\b(work|employ)", re.I),
    "studied_at": re.compile(r"\b(stud(y|ied|ies)|alma mater|educated)\b", re.I),
    "headquartered_in": re.compile(r"\b(headquarter|hq\b|based\b)", re.I),
    "founded_by": re.compile(r"\b(found(ed|er|ers|ing)?\b|establish|started)", re.I),
    "located_in": re.compile(r"\b(located|location)\b", re.I),
    "country": re.compile(r"\b(country|nation)\b", re.I),
    "capital": re.compile(r"\bcapital\b", re.I),
}

#: (question template, type of the entity it names, relation chain): 2 and 3 hops.
TEMPLATES: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("In which country was {e} born?", "person", ("born_in", "country")),
    ("In which city is the company that {e} works for headquartered?", "person", ("works_for", "headquartered_in")),
    ("Who founded the company that {e} works for?", "person", ("works_for", "founded_by")),
    ("In which city was the founder of {e} born?", "company", ("founded_by", "born_in")),
    ("In which city is the university where {e} studied located?", "person", ("studied_at", "located_in")),
    ("Which company does the founder of {e} work for?", "company", ("founded_by", "works_for")),
    ("What is the capital of the country where {e} was born?", "person", ("born_in", "country", "capital")),
    ("In which country is the company that {e} works for headquartered?", "person",
     ("works_for", "headquartered_in", "country")),
    ("In which country was the founder of {e} born?", "company", ("founded_by", "born_in", "country")),
    ("In which city was the founder of the company that {e} works for born?", "person",
     ("works_for", "founded_by", "born_in")),
    ("In which country is the university where {e} studied located?", "person",
     ("studied_at", "located_in", "country")),
    ("At which university did the founder of {e} study?", "company", ("founded_by", "studied_at")),
)

_SYLLABLES = ("ka", "lo", "mi", "ra", "ve", "to", "su", "ne", "ba", "di", "or", "an", "el", "qu", "zi",
              "po", "fe", "ha", "ju", "ly", "mo", "sa", "te", "vo", "wi", "xa", "yo", "ce", "gu", "ri")
_PROFESSIONS = ("chemist", "architect", "engineer", "historian", "pilot", "painter", "surgeon", "economist",
                "botanist", "journalist", "composer", "lawyer", "geologist", "teacher", "novelist", "baker")
_CITY_KINDS = ("port", "mountain", "river", "desert", "lakeside", "industrial", "university", "market")
_INDUSTRIES = ("software", "shipping", "mining", "textile", "aerospace", "food", "energy", "robotics",
               "insurance", "publishing")
_COMPANY_SUFFIXES = ("Labs", "Systems", "Holdings", "Industries", "Group", "Partners")
_UNIVERSITY_KINDS = ("technical", "medical", "arts", "agricultural", "public", "private")
_UNIVERSITY_FORMS = ("{w} University", "{w} Institute", "University of {w}")


@dataclass(frozen=True)
class Entity:
    """One entity: a unique name, a type, a short description and its relations."""

    name: str
    type: str
    description: str
    relations: tuple[tuple[str, str], ...]
    """(relation, target entity name) pairs, one per relation of the type, in table order."""

    def get(self, relation: str) -> str | None:
        return dict(self.relations).get(relation)


@dataclass(frozen=True)
class KnowledgeBase:
    """An immutable set of entities, indexed by normalised name."""

    entities: tuple[Entity, ...]
    index: dict[str, Entity] = field(init=False, repr=False, compare=False)
    """Normalised name -> entity, built from ``entities``."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "index", {normalize(e.name): e for e in self.entities})

    def find(self, name: str) -> Entity | None:
        """The entity called ``name`` (case, spacing and surrounding punctuation ignored)."""
        return self.index.get(normalize(name))

    def close_names(self, name: str, n: int = 3) -> list[str]:
        """Names that look like ``name``, for a helpful 'not found' message."""
        hits = difflib.get_close_matches(normalize(name), list(self.index), n=n, cutoff=0.6)
        return [self.index[h].name for h in hits]

    def follow(self, start: str, chain: tuple[str, ...]) -> list[str]:
        """The entity names visited by following ``chain`` from ``start`` (start excluded)."""
        path, current = [], self.find(start)
        for relation in chain:
            target = current.get(relation) if current is not None else None
            if target is None:
                raise ValueError(f"{start!r} has no path {chain}")
            path.append(target)
            current = self.find(target)
        return path

    def search(self, query: str, limit: int) -> list[Entity]:
        """Entities whose name, type or description share the most words with ``query``."""
        words = set(_words(query))
        if not words:
            return []
        scored = []
        for position, entity in enumerate(self.entities):
            overlap = len(words & set(_words(f"{entity.name} {entity.type} {entity.description}")))
            if overlap:
                scored.append((-overlap, position, entity))
        return [entity for _, _, entity in sorted(scored)[:limit]]

    def mentioned(self, text: str) -> list[Entity]:
        """Entities whose full name occurs in ``text``; a name inside a longer mentioned name
        (a city inside "University of <city>") does not count."""
        spans = []
        for entity in self.entities:
            for match in re.finditer(r"(?<!\w)" + re.escape(entity.name) + r"(?!\w)", text, re.I):
                spans.append((match.start(), match.end(), entity))
        kept = {e.name: e for s, t, e in spans
                if not any(s2 <= s and t <= t2 and (t2 - s2) > (t - s) for s2, t2, _ in spans)}
        return list(kept.values())

    def describe(self, entity: Entity) -> str:
        """The LOOKUP result: name, type, description and every relation."""
        lines = [f"{entity.name} ({entity.type}): {entity.description}"]
        lines += [f"  {relation}: {target}" for relation, target in entity.relations]
        return "\n".join(lines)

    def canonical(self) -> str:
        """Canonical text of the whole base (part of a problem's content hash)."""
        return "\n".join(f"{e.type}|{e.name}|{e.description}|{e.relations}" for e in self.entities)


def normalize(text: str) -> str:
    """Case-, space- and punctuation-insensitive form of an entity name or answer."""
    text = re.sub(r"\s+", " ", text.strip().lower())
    text = text.strip(" \t\"'`*.,;:!?()[]{}")
    return re.sub(r"^the ", "", text)


def _words(text: str) -> list[str]:
    return [w for w in re.findall(r"[a-z0-9]+", text.lower()) if len(w) > 1]


@dataclass(frozen=True)
class Interpretation:
    """What :func:`interpret` made of a question."""

    answer: str | None
    """The unique answer, or None when the question cannot be checked."""
    entity: str | None = None
    chain: tuple[str, ...] = ()
    reason: str = ""
    """Why there is no answer (for infos)."""


def interpret(kb: KnowledgeBase, question: str) -> Interpretation:
    """Read ``question`` as one named entity plus the relations its keywords name.

    The relations are composed in every order that type-checks from the entity's type;
    the longest such chains must all reach the same entity, which is the answer. A
    question naming no entity or several, no applicable relation, or relations that can
    be composed in ways with different answers, is uncheckable (``answer`` is None).
    """
    named = kb.mentioned(question)
    if len(named) != 1:
        return Interpretation(None, reason=f"the question names {len(named)} known entities, not exactly one")
    entity = named[0]
    keywords = [r for r, pattern in RELATION_KEYWORDS.items() if pattern.search(question)]
    best: dict[tuple[str, ...], str] = {}
    for size in range(len(keywords), 0, -1):
        for chain in itertools.permutations(keywords, size):
            if _type_checks(entity.type, chain):
                best[chain] = kb.follow(entity.name, chain)[-1]
        if best:
            break
    if not best:
        return Interpretation(None, entity.name, reason=f"no relation of a {entity.type} is named in the question")
    if len(set(best.values())) > 1:
        return Interpretation(None, entity.name, reason="the relations named can be composed with different answers")
    chain, answer = next(iter(best.items()))
    return Interpretation(answer, entity.name, chain)


def _type_checks(start_type: str, chain: tuple[str, ...]) -> bool:
    current = start_type
    for relation in chain:
        source, target = RELATIONS[relation]
        if source != current:
            return False
        current = target
    return True


def _article(word: str) -> str:
    return ("an " if word[0] in "aeiou" else "a ") + word


def _fresh_word(rng: random.Random, used: set[str], syllables: tuple[int, int]) -> str:
    while True:
        word = "".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(*syllables))).capitalize()
        if word.lower() not in used and len(word) >= 4:
            used.add(word.lower())
            return word


def generate_kb(
    rng: random.Random, *, people: int = 10, cities: int = 6, countries: int = 3, companies: int = 5,
    universities: int = 3,
) -> KnowledgeBase:
    """A random world. Every name word is unique, so no name is part of another unless by
    construction ("University of <word>" uses a word of its own, not a city's)."""
    if min(people, cities, countries, companies, universities) < 1 or cities < countries:
        raise ValueError("every entity type needs at least one entity, and every country a city")
    used: set[str] = set()
    country_names = [_fresh_word(rng, used, (2, 3)) + rng.choice(("ia", "land", "stan", "ora")) for _ in
                     range(countries)]
    city_names = [_fresh_word(rng, used, (2, 3)) for _ in range(cities)]
    company_names = [f"{_fresh_word(rng, used, (2, 3))} {rng.choice(_COMPANY_SUFFIXES)}" for _ in range(companies)]
    university_names = [rng.choice(_UNIVERSITY_FORMS).format(w=_fresh_word(rng, used, (2, 3)))
                        for _ in range(universities)]
    person_names = [f"{_fresh_word(rng, used, (2, 2))} {_fresh_word(rng, used, (2, 3))}" for _ in range(people)]

    city_country = {c: country_names[i] if i < countries else rng.choice(country_names)
                    for i, c in enumerate(city_names)}
    capitals = {k: rng.choice([c for c in city_names if city_country[c] == k]) for k in country_names}
    entities = [
        Entity(k, "country", "a country", (("capital", capitals[k]),)) for k in country_names
    ]
    entities += [
        Entity(c, "city", f"{_article(rng.choice(_CITY_KINDS))} city", (("country", city_country[c]),))
        for c in city_names
    ]
    entities += [
        Entity(name, "company", f"{_article(rng.choice(_INDUSTRIES))} company",
               (("headquartered_in", rng.choice(city_names)), ("founded_by", rng.choice(person_names))))
        for name in company_names
    ]
    entities += [
        Entity(name, "university", f"{_article(rng.choice(_UNIVERSITY_KINDS))} university",
               (("located_in", rng.choice(city_names)),))
        for name in university_names
    ]
    entities += [
        Entity(name, "person", _article(rng.choice(_PROFESSIONS)),
               (("born_in", rng.choice(city_names)), ("works_for", rng.choice(company_names)),
                ("studied_at", rng.choice(university_names))))
        for name in person_names
    ]
    return KnowledgeBase(tuple(entities))
