"""Tour files: :meth:`pyql.demo.TourSet.load` reads them, and says what is wrong with a bad one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pyql import demo
from pyql.errors import InputError


def _one_tour_file(tmp_path: Path, **changes: object) -> Path:
    tour = {
        "title": "lookup",
        "question": "When was Titanic released?",
        "entities": {"Titanic": "ex:Titanic"},
        "steps": ["add_fact(Titanic, ex:release_year, ?year)", "execute()"],
        "expected": ["1997"],
    }
    data = {"name": "mine", "title": "my tours", "language": "sparql", "tours": [tour]}
    data.update(changes)
    path = tmp_path / "tours.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def test_a_tour_file_loads_and_runs(tmp_path):
    path = _one_tour_file(tmp_path)
    tour_set = demo.TourSet.load(path, open_session=demo.KB_TOUR_SET.open_session)
    assert (tour_set.name, tour_set.title, tour_set.source) == ("mine", "my tours", "")
    (tour,) = tour_set.tours
    assert tour.steps == ("add_fact(Titanic, ex:release_year, ?year)", "execute()")
    assert tour.expected == frozenset({"1997"}) and tour.table is None
    assert demo.run_tour(tour_set, tour).ok


def test_built_in_tours_start_from_entities_or_a_table():
    from pyql.sql import demo as sql_demo

    assert demo.get_tour_set("kb").tours == demo.KB_TOURS
    assert all(t.entities and t.table is None for t in demo.KB_TOURS)
    assert all(t.table and not t.entities for t in sql_demo.SQL_TOURS)
    assert demo.get_tour_set("sql") is sql_demo.SQL_TOUR_SET


@pytest.mark.parametrize(
    ("changes", "problem"),
    [
        ({"language": "cypher"}, "language"),
        ({"tours": [{"title": "no question", "steps": ["execute()"]}]}, "tours.0.question"),
        (
            {"tours": [{"title": "t", "question": "q", "steps": [], "answer": "x"}]},
            "tours.0.answer",
        ),
        ({"tours": "none"}, "tours"),
    ],
    ids=["language", "missing field", "unknown field", "not a list"],
)
def test_a_bad_tour_file_names_the_field(tmp_path, changes, problem):
    path = _one_tour_file(tmp_path, **changes)
    with pytest.raises(demo.TourFileError) as info:
        demo.TourSet.load(path, open_session=demo.KB_TOUR_SET.open_session)
    assert isinstance(info.value, InputError)
    assert info.value.path == str(path)
    assert problem in info.value.problem


@pytest.mark.parametrize("text", ["{not json", "[1, 2]"], ids=["syntax", "array"])
def test_a_tour_file_that_is_not_a_json_object(tmp_path, text):
    path = tmp_path / "tours.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(demo.TourFileError, match="tours.json"):
        demo.TourSet.load(path, open_session=demo.KB_TOUR_SET.open_session)


def test_a_tour_set_module_that_does_not_import_is_a_lookup_error(monkeypatch):
    monkeypatch.setattr(demo, "TOUR_SETS", {"kb": demo.KB_TOUR_SET})
    monkeypatch.setattr(demo, "TOUR_SET_MODULES", {"sql": "pyql.no_such_module"})
    with pytest.raises(LookupError, match="pyql.no_such_module") as info:
        demo.get_tour_set("sql")
    assert isinstance(info.value.__cause__, ImportError)
