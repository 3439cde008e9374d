"""An agent's notes on the capture card ("**HH:MM** · noted by agent X · conversation") feed the keyword topics
with their words only: the stamp (time, "noted by agent", the agent's name, the link) is the app's scaffolding."""

from __future__ import annotations

from reme_engine.agent_capture import remember


def test_keyword_topics_skip_the_agent_stamp(tmp_path, make_engine):
    vault = tmp_path / "v"
    vault.mkdir()
    eng = make_engine(vault, embed=False, timezone="Asia/Shanghai")
    eng.index(vectors=False)
    for text in ("Pelican migration counts for the weekend survey", "Pelican survey: bring the long lens",
                 "Weekend pelican survey meeting point moved to the pier"):
        remember(eng, text, agent="zorbatron", conversation=[{"role": "user", "content": text}])
    date = eng.settings.today()
    rep = eng.proactive_refresh(date, use_llm=False)
    assert rep.status == "written", rep
    titles = [t["title"].casefold() for t in rep.topics if t["kind"] == "keyword"]
    assert any("pelican" in t for t in titles), titles
    words = {w for t in titles for w in t.replace("·", " ").split()}
    assert not words & {"noted", "agent", "zorbatron", "conversation"}, titles
