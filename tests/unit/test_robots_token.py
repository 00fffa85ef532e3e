"""The robots.txt product token of a crawl: --robots-agent, else derived from the
User-Agent; validated; used for robots.txt, meta robots and X-Robots-Tag alike."""

from __future__ import annotations

import pytest

from trawler.analysis import Analyser
from trawler.config import ConfigError, CrawlConfig, build_config
from trawler.fetch import Fetcher
from trawler.records import RobotsFetch
from trawler.robotscache import entry_from_kept

MOZILLA_UA = "Mozilla/5.0 (compatible; MyBot/1.0; +https://example.org/bot)"
URL = "https://example.org/page"


def config(**cli: object) -> CrawlConfig:
    return build_config(dict(cli), environ={})


@pytest.mark.parametrize(
    "cli, token",
    [
        ({}, "trawler"),
        ({"user_agent": MOZILLA_UA}, "mybot"),
        ({"user_agent": MOZILLA_UA, "robots_agent": "Other_Bot"}, "other_bot"),
        ({"robots_agent": "My-Bot"}, "my-bot"),
    ],
)
def test_robots_token(cli: dict[str, object], token: str) -> None:
    assert config(**cli).robots_token == token


@pytest.mark.parametrize("value", ["My Bot", "MyBot/1.0", "bot2", "", "ツbot", "*"])
def test_robots_agent_must_be_an_rfc_9309_token(value: str) -> None:
    with pytest.raises(ConfigError) as caught:
        config(robots_agent=value)
    message = str(caught.value)
    assert message.startswith("invalid --robots-agent: ") and "Value error" not in message
    assert "\n" not in message


def test_robots_agent_from_environment_and_toml(tmp_path) -> None:
    assert build_config({}, environ={"TRAWLER_ROBOTS_AGENT": "EnvBot"}).robots_token == "envbot"
    toml = tmp_path / "crawl.toml"
    toml.write_text('[crawl]\nrobots-agent = "TomlBot"\n')
    assert build_config({}, toml, environ={}).robots_token == "tomlbot"


def test_token_travels_with_the_stored_job_config() -> None:
    stored = CrawlConfig.model_validate_json(config(robots_agent="MyBot").model_dump_json())
    assert stored.robots_token == "mybot"
    assert build_config({}, base=stored, environ={}).robots_token == "mybot"


def test_token_is_not_part_of_the_fetch_profile() -> None:
    # Kept robots.txt answers are bodies, read again by each job with its own token,
    # so jobs that send the same headers share them whatever their tokens.
    plain = Fetcher(config(user_agent=MOZILLA_UA))
    explicit = Fetcher(config(user_agent=MOZILLA_UA, robots_agent="OtherBot"))
    assert plain.profile == explicit.profile
    assert Fetcher(config()).profile != plain.profile  # the header is


def test_a_kept_body_gives_each_token_its_own_verdict() -> None:
    kept = RobotsFetch(200, None, b"User-agent: MyBot\nDisallow: /\n", 1000.0, 0)
    mine = entry_from_kept(kept, config(user_agent=MOZILLA_UA).robots_token, 10.0, 1000.0)
    other = entry_from_kept(kept, config(robots_agent="OtherBot").robots_token, 10.0, 1000.0)
    assert not mine.rules.allowed(URL)
    assert other.rules.allowed(URL)


def test_meta_robots_use_the_same_token() -> None:
    mozilla = Analyser.build(config(user_agent=MOZILLA_UA).model_dump_json(), [])
    assert mozilla.agent_token == "mybot"
    other = Analyser.build(config(robots_agent="OtherBot").model_dump_json(), [])
    assert other.agent_token == "otherbot"
