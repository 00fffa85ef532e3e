"""Conformance suite for trawler.robots, organised by RFC 9309 section.

Cases come from the RFC's text and examples; where the RFC leaves room, from
the behaviour of Google's reference parser (github.com/google/robotstxt).
"""

from __future__ import annotations

import dataclasses
import time

import pytest

from trawler import robots
from trawler.robots import MAX_LINE_BYTES, MAX_ROBOTS_BYTES, Rules, Verdict, parse

HOST = "https://example.com"


def allowed(body: bytes | str, agent: str, path: str) -> bool:
    return parse(body, agent).allowed(HOST + path)


# --- §2.1 / §2.2 protocol definition and line syntax --------------------------


class TestLineSyntax:
    @pytest.mark.parametrize(
        "body",
        [
            "user-agent: FooBot\ndisallow: /\n",
            "USER-AGENT: FooBot\nDISALLOW: /\n",
            "uSeR-aGeNt: FooBot\ndIsAlLoW: /\n",
            "  user-agent  :  FooBot  \n\t disallow\t:\t/ \t\n",
            "user-agent:FooBot\ndisallow:/\n",
            # Google: a missing colon is accepted for exactly two words.
            "user-agent FooBot\ndisallow /\n",
            "user-agent\tFooBot\ndisallow\t/\n",
        ],
    )
    def test_keys_case_insensitive_and_whitespace_tolerant(self, body: str) -> None:
        assert not allowed(body, "FooBot", "/x/y")

    @pytest.mark.parametrize(
        "body",
        [
            "foo: FooBot\nbar: /\n",  # unknown keys
            "user-agent: FooBot\ndisallow / x\n",  # no colon and three words
            "user-agent: FooBot\ndisallow\n",  # no value, no colon
            "user-agent: FooBot\n: /\n",  # empty key
            "user-agent: FooBot\n# disallow: /\n",  # comment line
        ],
    )
    def test_malformed_and_unknown_lines_are_ignored(self, body: str) -> None:
        assert allowed(body, "FooBot", "/x/y")

    @pytest.mark.parametrize(
        "key",
        [
            "user-agent",
            "User-Agent",
            "useragent",
            "user agent",
        ],
    )
    def test_user_agent_spellings(self, key: str) -> None:
        assert not allowed(f"{key}: FooBot\ndisallow: /\n", "FooBot", "/x")

    @pytest.mark.parametrize(
        "key", ["disallow", "dissallow", "dissalow", "disalow", "diasllow", "disallaw"]
    )
    def test_disallow_misspellings_google_accepts(self, key: str) -> None:
        assert not allowed(f"user-agent: FooBot\n{key}: /\n", "FooBot", "/x")

    def test_unrelated_key_is_not_taken_for_a_rule(self) -> None:
        assert allowed("user-agent: FooBot\ndisable: /\nnoindex: /\n", "FooBot", "/x")


class TestLineEndingsAndEncoding:
    RULES = ["User-Agent: foo", "Allow: /some/path", "User-Agent: bar", "", "", "Disallow: /"]

    @pytest.mark.parametrize(
        "eol_name, body",
        [
            ("LF", "\n".join(RULES) + "\n"),
            ("CRLF", "\r\n".join(RULES) + "\r\n"),
            ("CR", "\r".join(RULES) + "\r"),
            ("no final newline", "\n".join(RULES)),
            ("mixed", "User-Agent: foo\nAllow: /some/path\r\nUser-Agent: bar\n\r\n\nDisallow: /"),
        ],
    )
    def test_cr_lf_crlf_and_line_numbers(self, eol_name: str, body: str) -> None:
        verdict = parse(body, "bar").explain(HOST + "/x")
        assert verdict == Verdict(False, "Disallow: /", 6, "bar"), eol_name
        assert parse(body, "foo").allowed(HOST + "/x")

    @pytest.mark.parametrize(
        "prefix", [b"\xef\xbb\xbf", b"\xef\xbb", b"\xef"], ids=["full", "two", "one"]
    )
    def test_utf8_bom_is_skipped(self, prefix: bytes) -> None:
        rules = parse(prefix + b"User-Agent: foo\nDisallow: /x\n", "foo")
        assert not rules.allowed(HOST + "/x")
        assert rules.explain(HOST + "/x").line == 2

    def test_bom_as_str(self) -> None:
        assert not allowed("\ufeffUser-Agent: foo\nDisallow: /x\n", "foo", "/x")

    def test_broken_bom_spoils_only_the_first_line(self) -> None:
        body = b"\xef\x11\xbfUser-Agent: foo\nDisallow: /x\nUser-Agent: foo\nDisallow: /y\n"
        rules = parse(body, "foo")
        assert rules.allowed(HOST + "/x")
        assert not rules.allowed(HOST + "/y")

    def test_bom_in_the_middle_is_not_skipped(self) -> None:
        assert allowed(b"User-Agent: foo\n\xef\xbb\xbfDisallow: /x\n", "foo", "/x")

    @pytest.mark.parametrize(
        "body",
        [
            b"\x00\xff\xfe\x80garbage\x00\n\xc3\x28: \xa0\xa1\n",
            bytes(range(256)) * 50,
            b"User-agent: *\nDisallow: /\xff\xfe\n",
            b"User-agent: \xff\nDisallow: /\n",
            "User-agent: *\nDisallow: /\ud800x\n",  # a lone surrogate in a str
            b":::\n###\n\r\r\n\n: : :\n*\n$\n",
        ],
    )
    def test_garbage_and_binary_never_raise(self, body: bytes | str) -> None:
        rules = parse(body, "trawler")
        assert isinstance(rules.allowed(HOST + "/x"), bool)
        verdict = rules.explain(HOST + "/\udcff/\u00e9")
        if verdict.rule:
            verdict.rule.encode("utf-8")  # printable: no surrogates leak out
        if verdict.group:
            verdict.group.encode("utf-8")

    def test_invalid_utf8_in_pattern_is_compared_as_octets(self) -> None:
        rules = parse(b"User-agent: *\nDisallow: /a\xff\n", "trawler")
        assert not rules.allowed(HOST + "/a%FF")
        assert not rules.allowed(HOST + "/a%ffb")
        assert rules.allowed(HOST + "/a")
        assert rules.explain(HOST + "/a%FF").rule == "Disallow: /a\ufffd"


class TestComments:
    # RFC 9309 §2.2.3: "#" designates a line comment, anywhere on the line.
    BODY = (
        "# leading comment\n"
        "User-agent: FooBot # the bot\n"
        "# Disallow: /\n"
        "Disallow: /foo/quz#qux\n"
        "Allow: / # comment in line\n"
    )

    @pytest.mark.parametrize(
        "path, expected",
        [("/foo/bar", True), ("/foo/quz", False), ("/foo/quzqux", False), ("/", True)],
    )
    def test_comments_anywhere(self, path: str, expected: bool) -> None:
        assert allowed(self.BODY, "FooBot", path) is expected

    def test_user_agent_value_comment_stripped(self) -> None:
        assert parse(self.BODY, "foobot").group == "FooBot"


# --- §2.2.1 the user-agent line -------------------------------------------------


class TestUserAgentToken:
    @pytest.mark.parametrize(
        "user_agent, token",
        [
            ("Trawler/0.1 (+https://github.com/trawler-crawler/trawler)", "trawler"),
            ("trawler", "trawler"),
            ("  ExampleBot/0.1", "examplebot"),
            ("Googlebot-News", "googlebot-news"),
            ("foo_bar baz", "foo_bar"),
            ("Mozilla/5.0 (compatible; ExampleBot/0.1)", "examplebot"),
            ("Mozilla/5.0 (compatible; MyBot/1.0; +https://example.org/bot)", "mybot"),
            (
                "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)",
                "googlebot",
            ),
            ("Mozilla/5.0 (compatible; bingbot/2.0; +http://www.bing.com/bingbot.htm)", "bingbot"),
            # Googlebot smartphone and desktop (Google's "Googlebot user agents" page).
            (
                "Mozilla/5.0 (Linux; Android 6.0.1; Nexus 5X Build/MMB29P) AppleWebKit/537.36 "
                "(KHTML, like Gecko) Chrome/120.0.0.0 Mobile Safari/537.36 (compatible; "
                "Googlebot/2.1; +http://www.google.com/bot.html)",
                "googlebot",
            ),
            (
                "Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; Googlebot/2.1; "
                "+http://www.google.com/bot.html) Chrome/120.0.0.0 Safari/537.36",
                "googlebot",
            ),
            ("mozilla/5.0 (Compatible;  YandexBot/3.0)", "yandexbot"),
            ("Mozilla/5.0 (X11; Linux x86_64; rv:120.0) Gecko/20100101 Firefox/120.0", "mozilla"),
            ("Mozilla/5.0", "mozilla"),
            ("ExampleBot/1.0 (compatible; OtherBot/2.0)", "examplebot"),  # Mozilla/ only
            ("123bot", "123bot"),  # not an RFC 9309 token, but the product a site names
            ("", ""),
            ("ツbot/1.0", "ツbot"),
        ],
    )
    def test_product_token(self, user_agent: str, token: str) -> None:
        assert robots.user_agent_token(user_agent) == token


class TestGroupSelection:
    @pytest.mark.parametrize(
        "ua_line, agent, matches",
        [
            ("FooBot", "foobot", True),
            ("FOOBOT", "FooBot", True),
            ("foobot", "FOOBOT/2.1 (+http://x)", True),
            ("FooBot/2.1", "foobot", True),  # matched on the leading [a-zA-Z_-] run
            ("Foo Bar", "foo", True),  # Google: up to the first space
            ("FooBot-News", "foobot", False),  # a different token, not a substring
            ("FooBot", "foobot-news", False),
            ("Foo", "foobot", False),  # no prefix matching either
            ("xFooBot", "foobot", False),
            ("FooBot*", "foobot", True),  # "*" ends the token
            ("Rule1Bot", "rule", False),  # the whole name: Google reads "Rule" here
            ("Rule1Bot", "Rule1Bot", True),
            ("FooBot2", "foobot", False),
            ("MyBot", "Mozilla/5.0 (compatible; MyBot/1.0; +https://example.org/bot)", True),
            ("Mozilla", "Mozilla/5.0 (compatible; MyBot/1.0; +https://example.org/bot)", False),
            ("Jävla-Foobot", "jävla-fanbot", False),  # Google reads "J" for both
            ("Львів-bot", "Mozilla/5.0 (compatible; ЛЬВІВ-bot/1.1)", True),
            ("*FooBot", "foobot", False),
            ("", "foobot", False),
        ],
    )
    def test_token_match_not_substring(self, ua_line: str, agent: str, matches: bool) -> None:
        body = f"User-agent: *\nAllow: /\n\nUser-agent: {ua_line}\nDisallow: /\n"
        assert allowed(body, agent, "/x") is not matches

    def test_foo_bar_line_names_foo(self) -> None:
        body = "User-Agent: *\nDisallow: /\nUser-Agent: Foo Bar\nAllow: /x/\nDisallow: /\n"
        assert allowed(body, "Foo", "/x/y")
        assert not allowed(body, "Foo", "/y")
        assert not allowed(body, "Bar", "/x/y")  # the "*" group: only "Foo" is named

    def test_several_user_agent_lines_share_one_group(self) -> None:
        body = "User-agent: a\nUser-agent: b\n\nUser-agent: c\nDisallow: /\n"
        for agent in ("a", "b", "c"):
            assert not allowed(body, agent, "/x")
        assert parse(body, "b").group == "a, b, c"

    def test_groups_naming_the_same_agent_are_merged(self) -> None:
        # RFC 9309 §2.2.1, the merge table.
        body = (
            "user-agent: ExampleBot\ndisallow: /foo\ndisallow: /bar\n\n"
            "user-agent: ExampleBot\ndisallow: /baz\n"
        )
        rules = parse(body, "examplebot")
        for path in ("/foo", "/bar", "/baz"):
            assert not rules.allowed(HOST + path)
        assert rules.allowed(HOST + "/qux")
        assert rules.explain(HOST + "/baz").line == 6

    def test_star_only_when_no_specific_group(self) -> None:
        # RFC 9309 §2.2.1, the "*" table.
        body = (
            "user-agent: *\ndisallow: /foo\ndisallow: /bar\n\nuser-agent: BazBot\ndisallow: /baz\n"
        )
        example = parse(body, "ExampleBot")
        assert not example.allowed(HOST + "/foo")
        assert example.allowed(HOST + "/baz")
        baz = parse(body, "BazBot")
        assert baz.allowed(HOST + "/foo")
        assert not baz.allowed(HOST + "/baz")

    def test_specific_group_wins_even_when_empty_or_more_lenient(self) -> None:
        body = "User-agent: *\nDisallow: /x/\nUser-agent: FooBot\nDisallow: /y/\n"
        assert allowed(body, "FooBot", "/x/page")
        assert not allowed(body, "FooBot", "/y/page")
        empty = "User-agent: *\nDisallow: /\nUser-agent: FooBot\n"
        assert allowed(empty, "FooBot", "/x")
        assert not allowed(empty, "Other", "/x")

    def test_multiple_star_groups_merge(self) -> None:
        body = (
            "User-agent: *\nDisallow: /a\nUser-agent: x\nDisallow: /\nUser-agent: *\nDisallow: /b\n"
        )
        rules = parse(body, "trawler")
        assert not rules.allowed(HOST + "/a")
        assert not rules.allowed(HOST + "/b")
        assert rules.allowed(HOST + "/c")

    @pytest.mark.parametrize("value", ["*", "* # all", "*   everyone"])
    def test_star_variants(self, value: str) -> None:
        assert not allowed(f"User-agent: {value}\nDisallow: /\n", "trawler", "/x")

    @pytest.mark.parametrize(
        "body",
        [
            "",
            "\n\n# nothing\n",
            "user-agent: FooBot\ndisallow: /\nuser-agent: BarBot\ndisallow: /\n",
        ],
    )
    def test_no_matching_group_and_no_star_allows_all(self, body: str) -> None:
        rules = parse(body, "QuxBot")
        assert rules.allowed(HOST + "/x/y")
        assert rules.explain(HOST + "/x") == Verdict(True, None, None, None)

    def test_group_shared_by_star_and_us_is_ours(self) -> None:
        body = "User-agent: *\nDisallow: /a\nUser-agent: trawler\nUser-agent: *\nDisallow: /b\n"
        rules = parse(body, "trawler")
        assert rules.allowed(HOST + "/a")
        assert not rules.allowed(HOST + "/b")

    def test_rules_before_any_group_are_ignored(self) -> None:
        # Google's ID_LineSyntax_Groups example.
        body = (
            "allow: /foo/bar/\n\nuser-agent: FooBot\ndisallow: /\nallow: /x/\n"
            "user-agent: BarBot\ndisallow: /\nallow: /y/\n\n\nallow: /w/\n"
            "user-agent: BazBot\n\nuser-agent: FooBot\nallow: /z/\ndisallow: /\n"
        )
        cases = [
            ("FooBot", "/x/b", True),
            ("FooBot", "/z/d", True),
            ("FooBot", "/y/c", False),
            ("BarBot", "/y/c", True),
            ("BarBot", "/w/a", True),
            ("BarBot", "/z/d", False),
            ("BazBot", "/z/d", True),
            ("FooBot", "/foo/bar/", False),
            ("BarBot", "/foo/bar/", False),
            ("BazBot", "/foo/bar/", False),
        ]
        for agent, path, expected in cases:
            assert allowed(body, agent, path) is expected, (agent, path)

    @pytest.mark.parametrize("line", ["Sitemap: /s.xml", "Crawl-delay: 5", "Noindex: /x"])
    def test_other_record_ends_a_run_of_user_agents(self, line: str) -> None:
        # Google: any keyed line between user-agent lines starts a new group.
        body = f"User-agent: a\n{line}\nUser-agent: b\nDisallow: /\n"
        assert allowed(body, "a", "/x")
        assert not allowed(body, "b", "/x")

    def test_sitemap_does_not_terminate_a_group(self) -> None:
        # RFC 9309 §2.2.4: a Sitemaps record MUST NOT terminate a group.
        body = "User-agent: a\nDisallow: /x\nSitemap: https://e.com/s.xml\nDisallow: /y\n"
        assert not allowed(body, "a", "/y")


# --- §2.2.2 allow and disallow lines --------------------------------------------


def group(*lines: str) -> str:
    return "User-agent: FooBot\n" + "".join(line + "\n" for line in lines)


class TestLongestMatch:
    @pytest.mark.parametrize(
        "body, path, expected",
        [
            (group("disallow: /x/page.html", "allow: /x/"), "/x/page.html", False),
            (group("allow: /x/page.html", "disallow: /x/"), "/x/page.html", True),
            (group("allow: /x/page.html", "disallow: /x/"), "/x/", False),
            (group("disallow: /x", "allow: /x/"), "/x", False),
            (group("disallow: /x", "allow: /x/"), "/x/", True),
            (group("allow: /page", "disallow: /*.html"), "/page.html", False),
            (group("allow: /page", "disallow: /*.html"), "/page", True),
            (group("allow: /x/page.", "disallow: /*.html"), "/x/page.html", True),
            (group("allow: /x/page.", "disallow: /*.html"), "/x/y.html", False),
            (group("allow: /p", "disallow: /"), "/page", True),
            (group("allow: /page", "disallow: /*.htm"), "/page.htm", False),
            (group("allow: /$", "disallow: /"), "/", True),
            (group("allow: /$", "disallow: /"), "/page.html", False),
            # RFC 9309 §5.2: the longer Disallow beats the Allow.
            (
                group("Allow: /example/page/", "Disallow: /example/page/disallowed.gif"),
                "/example/page/disallowed.gif",
                False,
            ),
            (
                group("Allow: /example/page/", "Disallow: /example/page/disallowed.gif"),
                "/example/page/other.gif",
                True,
            ),
        ],
    )
    def test_most_octets_wins(self, body: str, path: str, expected: bool) -> None:
        assert allowed(body, "FooBot", path) is expected

    @pytest.mark.parametrize(
        "lines",
        [
            ("disallow: /", "allow: /"),
            ("allow: /", "disallow: /"),
            ("disallow: /x/page.html", "allow: /x/page.html"),
            ("allow: /folder", "disallow: /folder"),
            ("disallow: /*.html", "allow: /x/*html"),  # same length, wildcards
        ],
    )
    def test_allow_wins_a_tie(self, lines: tuple[str, str]) -> None:
        # RFC 9309 §2.2.2: equivalent allow and disallow → allow SHOULD be used.
        assert allowed(group(*lines), "FooBot", "/x/page.html")

    @pytest.mark.parametrize("lines", [("disallow:",), ("disallow: ", "allow: "), ("allow:",)])
    def test_empty_value_matches_nothing(self, lines: tuple[str, ...]) -> None:
        rules = parse(group(*lines), "FooBot")
        assert rules.explain(HOST + "/x") == Verdict(True, None, None, "FooBot")

    def test_empty_disallow_does_not_hide_other_rules(self) -> None:
        assert not allowed(group("disallow:", "disallow: /x"), "FooBot", "/x")

    @pytest.mark.parametrize(
        "path, expected", [("/x/y", False), ("/X/y", True), ("/x", True), ("/", True)]
    )
    def test_matching_is_case_sensitive_and_from_first_octet(
        self, path: str, expected: bool
    ) -> None:
        assert allowed(group("disallow: /x/"), "FooBot", path) is expected

    def test_pattern_without_leading_slash_matches_nothing(self) -> None:
        assert allowed(group("disallow: x"), "FooBot", "/x")

    # Google's documentation table for "allow: /fish" etc. (disallow: / first).
    @pytest.mark.parametrize(
        "pattern, path, expected",
        [
            ("/fish", "/fish", True),
            ("/fish", "/fish.html", True),
            ("/fish", "/fish/salmon.html", True),
            ("/fish", "/fishheads/yummy.html", True),
            ("/fish", "/fish.html?id=anything", True),
            ("/fish", "/Fish.asp", False),
            ("/fish", "/catfish", False),
            ("/fish", "/?id=fish", False),
            ("/fish*", "/fishheads", True),
            ("/fish*", "/catfish", False),
            ("/fish/", "/fish/?salmon", True),
            ("/fish/", "/fish", False),
            ("/fish/", "/Fish/Salmon.html", False),
            ("/*.php", "/folder/filename.php?parameters", True),
            ("/*.php", "//folder/any.php.file.html", True),
            ("/*.php", "/index?f=filename.php/", True),
            ("/*.php", "/php/", False),
            ("/*.php", "/windows.PHP", False),
            ("/*.php$", "/folder/filename.php", True),
            ("/*.php$", "/filename.php?parameters", False),
            ("/*.php$", "/filename.php/", False),
            ("/*.php$", "/filename.php5", False),
            ("/fish*.php", "/fishheads/catfish.php?parameters", True),
            ("/fish*.php", "/Fish.PHP", False),
        ],
    )
    def test_google_documentation_examples(self, pattern: str, path: str, expected: bool) -> None:
        assert allowed(group("disallow: /", f"allow: {pattern}"), "FooBot", path) is expected


class TestPercentEncoding:
    # RFC 9309 §2.2.2 table "Examples of matching percent-encoded URI components",
    # plus the cases the brief and Google's ID_Encoding test call out.
    @pytest.mark.parametrize(
        "pattern, path, matches",
        [
            ("/foo/bar?baz=quz", "/foo/bar?baz=quz", True),
            ("/foo/bar?baz=https%3A%2F%2Ffoo.bar", "/foo/bar?baz=https%3A%2F%2Ffoo.bar", True),
            ("/foo/bar?baz=https%3a%2f%2ffoo.bar", "/foo/bar?baz=https%3A%2F%2Ffoo.bar", True),
            ("/foo/bar/ツ", "/foo/bar/%E3%83%84", True),
            ("/foo/bar/ツ", "/foo/bar/%e3%83%84", True),
            ("/foo/bar/ツ", "/foo/bar/ツ", True),  # we encode the URL too
            ("/foo/bar/%E3%83%84", "/foo/bar/%E3%83%84", True),
            ("/foo/bar/%e3%83%84", "/foo/bar/ツ", True),
            ("/foo/bar/%62%61%7A", "/foo/bar/baz", True),  # unreserved: decoded
            ("/foo/bar/baz", "/foo/bar/%62%61%7a", True),
            ("/foo/bar/%62%61%7A", "/foo/bar/%62%61%7A", True),
            ("/a%7Eb", "/a~b", True),
            ("/SanJoséSellers", "/SanJos%C3%A9Sellers", True),
            ("/a b", "/a%20b", True),
            ("/a%20b", "/a b", True),
            (
                "/foo/bar?qux=taz&baz=http://foo.bar?tar&par",
                "/foo/bar?qux=taz&baz=http://foo.bar?tar&par",
                True,
            ),
            # Reserved characters stay distinct from their encodings (RFC 3986 §2.2).
            ("/a%2Fb", "/a/b", False),
            ("/a/b", "/a%2Fb", False),
            ("/a%2fb", "/a%2Fb", True),
            ("/foo/bar?baz=https://foo.bar", "/foo/bar?baz=https%3A%2F%2Ffoo.bar", False),
            ("/a%3Fb", "/a?b", False),
            # RFC 9309 §2.2.3: special characters matched verbatim are %-encoded.
            ("/path/file-with-a-%2A.html", "/path/file-with-a-*.html", True),
            ("/path/file-with-a-%2A.html", "/path/file-with-a-%2A.html", True),
            ("/path/file-with-a-%2A.html", "/path/file-with-a-x.html", False),
            ("/path/foo-%24", "/path/foo-$", True),
            ("/a$b", "/a$b", True),  # "$" not at the end is literal
            ("/a$b", "/a%24b", True),
            ("/a%", "/a%25", True),  # a stray "%" is an octet like any other
        ],
    )
    def test_encoding_equivalence(self, pattern: str, path: str, matches: bool) -> None:
        assert allowed(group("disallow: /", f"allow: {pattern}"), "FooBot", path) is matches

    def test_pattern_is_matched_by_octets_of_its_encoding(self) -> None:
        # "/ツ" is 3 octets encoded as 9: it outranks "/abcdefg" (8 octets).
        body = group("disallow: /%E3%83%84", "allow: /ツabc")
        assert allowed(body, "FooBot", "/%E3%83%84abc")
        body = group("allow: /abcdefg", "disallow: /ツ")
        assert not allowed(body, "FooBot", "/%E3%83%84")


# --- §2.2.3 special characters ----------------------------------------------------


class TestSpecialCharacters:
    @pytest.mark.parametrize(
        "lines, path, expected",
        [
            (("Disallow: /foo/bar/quz", "Allow: /foo/*/qux"), "/foo/bar/quz", False),
            (("Disallow: /foo/bar/quz", "Allow: /foo/*/qux"), "/foo/quz", True),
            (("Disallow: /foo/bar/quz", "Allow: /foo/*/qux"), "/foo//quz", True),
            (("Disallow: /foo/bar$", "Allow: /foo/bar/qux"), "/foo/bar", False),
            (("Disallow: /foo/bar$", "Allow: /foo/bar/qux"), "/foo/bar/qux", True),
            (("Disallow: /foo/bar$", "Allow: /foo/bar/qux"), "/foo/bar/", True),
            (("Disallow: /foo/bar$",), "/foo/bar?x", True),
            (("Disallow: /*",), "/anything", False),
            (("Disallow: *",), "/anything", False),
            (("Disallow: /**/x",), "/a/b/x", False),
            (("Disallow: /a*b*c",), "/a-b-c", False),
            (("Disallow: /a*b*c",), "/a-c-b", True),
            (("Disallow: /a*b*c$",), "/abcbc", False),
            (("Disallow: /a*b*c$",), "/abcb", True),
            (("Disallow: /a*c$",), "/ac", False),
            (("Disallow: /a*c$",), "/a", True),
            (("Disallow: /a*$",), "/a", False),
            (("Disallow: /a*$",), "/abc", False),
            (("Disallow: /a*b*$",), "/axbyz", False),
            (("Disallow: /a*aab$",), "/aaab", False),
            (("Disallow: /*?",), "/x?y", False),
            (("Disallow: /*?",), "/x", True),
            (("Disallow: $",), "/", True),
            (("Disallow: /$",), "/", False),
            (("Disallow: /$",), "/?q", True),
        ],
    )
    def test_star_and_dollar(self, lines: tuple[str, ...], path: str, expected: bool) -> None:
        assert allowed(group(*lines), "FooBot", path) is expected

    def test_hostile_wildcards_stay_fast(self) -> None:
        # Back-tracking regexes take exponential time here; left-most find does not.
        rules = parse(group("Disallow: /" + "*a" * 40 + "*b$"), "FooBot")
        start = time.perf_counter()
        assert rules.allowed(HOST + "/" + "a" * 2000)
        assert time.perf_counter() - start < 0.5


# --- §2.2.2 what is matched: the path and query of the URL --------------------------


class TestUrlPath:
    @pytest.mark.parametrize(
        "url, expected",
        [
            ("https://example.com", False),  # empty path is "/"
            ("https://example.com/", False),
            ("https://example.com?x=1", True),  # "/?x=1"
            ("https://example.com/#frag", False),
            ("https://example.com/a?q#frag", True),
            ("https://user:pw@example.com:8443/a", True),
            ("//example.com/a", True),
            ("HTTP://EXAMPLE.COM/a", True),
        ],
    )
    def test_path_and_query(self, url: str, expected: bool) -> None:
        rules = parse(group("disallow: /$", "allow: /a", "allow: /?"), "FooBot")
        assert rules.allowed(url) is expected

    def test_query_is_matched(self) -> None:
        rules = parse(group("disallow: /search?q="), "FooBot")
        assert not rules.allowed(HOST + "/search?q=x")
        assert rules.allowed(HOST + "/search")

    def test_fragment_is_not_matched(self) -> None:
        rules = parse(group("disallow: /a$"), "FooBot")
        assert not rules.allowed(HOST + "/a#section")

    @pytest.mark.parametrize("rules", [Rules.disallow_all(), robots.disallow_all()])
    def test_robots_txt_is_implicitly_allowed(self, rules: Rules) -> None:
        assert rules.allowed(HOST + "/robots.txt")
        assert not rules.allowed(HOST + "/robots.txt.bak")
        body = parse(group("disallow: /"), "FooBot")
        assert body.allowed(HOST + "/robots.txt")
        assert body.explain(HOST + "/robots.txt").allowed


# --- §2.3.1 access results ---------------------------------------------------------


class TestAccessResults:
    @pytest.mark.parametrize("rules", [Rules.allow_all(), robots.allow_all()])
    def test_unavailable_allows_all(self, rules: Rules) -> None:
        # RFC 9309 §2.3.1.3: a 4xx means crawl anything.
        assert rules.allowed(HOST + "/anything?at=all")
        assert rules.crawl_delay is None
        assert rules.sitemaps == []
        assert rules.explain(HOST + "/x") == Verdict(True, None, None, None)

    def test_unreachable_disallows_all(self) -> None:
        # RFC 9309 §2.3.1.4: a 5xx or network error means complete disallow.
        rules = Rules.disallow_all()
        assert not rules.allowed(HOST + "/")
        assert not rules.allowed(HOST + "/x")
        assert rules.explain(HOST + "/x") == Verdict(False, "Disallow: /", None, None)


# --- §2.5 limits -------------------------------------------------------------------


class TestLimits:
    def test_600_kib_file(self) -> None:
        head = b"User-agent: *\nDisallow: /early\n"
        filler = b"".join(b"Disallow: /filler/%06d/\n" % i for i in range(15_000))
        cut_line = b"Disallow: /cut-in-half-by-the-limit\n"
        body = head + filler
        body += b"#" * (MAX_ROBOTS_BYTES - len(body) - len(cut_line) // 2 - 1) + b"\n"
        body += cut_line + b"Disallow: /late\n"
        body += b"# padding\n" * ((600 * 1024 - len(body)) // 10 + 1)
        assert len(body) > 600 * 1024
        start = time.perf_counter()
        rules = parse(body, "trawler")
        assert time.perf_counter() - start < 5
        assert not rules.allowed(HOST + "/early")
        assert not rules.allowed(HOST + "/filler/014999/")
        # RFC 9309 §2.5: content past the limit is ignored, and the line the
        # limit cuts is dropped whole (half of it could be a broader rule).
        assert rules.allowed(HOST + "/late")
        assert rules.allowed(HOST + "/cut-in-two")  # not matched by "/cut-in-"

    def test_limit_is_at_least_500_kib(self) -> None:
        assert MAX_ROBOTS_BYTES >= 500 * 1024

    def test_last_rule_inside_the_limit_is_kept(self) -> None:
        head = b"User-agent: *\n"
        rule = b"Disallow: /last\n"
        body = head + b"#" * (MAX_ROBOTS_BYTES - len(head) - len(rule) - 1) + b"\n" + rule
        assert len(body) == MAX_ROBOTS_BYTES
        assert not parse(body + b"Disallow: /after\n", "x").allowed(HOST + "/last")

    def test_long_line_is_cut_like_google(self) -> None:
        # Google: bytes of a line past 2083 * 8 are ignored.
        prefix = "disallow: "
        long_path = "/x/" + "a" * (MAX_LINE_BYTES - len(prefix) - 3)
        rules = parse(group(prefix + long_path + "/qux"), "FooBot")
        assert rules.allowed(HOST + "/fux")
        assert not rules.allowed(HOST + long_path + "/fux")


# --- other records (§2.2.4): crawl-delay and sitemaps ---------------------------------


class TestCrawlDelay:
    @pytest.mark.parametrize(
        "lines, expected",
        [
            (("Crawl-delay: 5",), 5.0),
            (("crawl-delay: 0.5",), 0.5),
            (("Crawl-Delay:10 # slow",), 10.0),
            (("crawldelay: 2",), 2.0),
            (("Crawl-delay: 0",), 0.0),
            (("Crawl-delay: -1",), None),
            (("Crawl-delay: abc",), None),
            (("Crawl-delay: nan",), None),
            (("Crawl-delay: inf",), None),
            (("Crawl-delay:",), None),
            (("Crawl-delay: 1,5",), None),
            (("Crawl-delay: x", "Crawl-delay: 3", "Crawl-delay: 4"), 3.0),
            ((), None),
        ],
    )
    def test_parse(self, lines: tuple[str, ...], expected: float | None) -> None:
        assert parse(group(*lines), "FooBot").crawl_delay == expected

    def test_from_the_chosen_group_only(self) -> None:
        body = "User-agent: *\nCrawl-delay: 9\n\nUser-agent: FooBot\nCrawl-delay: 2\n"
        assert parse(body, "FooBot").crawl_delay == 2.0
        assert parse(body, "Other").crawl_delay == 9.0
        assert parse("User-agent: x\nCrawl-delay: 9\n", "Other").crawl_delay is None
        assert parse("Crawl-delay: 9\nUser-agent: *\n", "Other").crawl_delay is None


class TestSitemaps:
    def test_all_sitemaps_regardless_of_group(self) -> None:
        body = (
            "Sitemap: https://example.com/a.xml\n"
            "User-agent: other\nDisallow: /\n"
            "sitemap:https://example.com/b.xml # comment\n"
            "User-agent: *\nSite-map: https://example.com/c.xml\n"
            "Sitemap: https://example.com/a.xml\n"
            "Sitemap:\n"
        )
        expected = [f"https://example.com/{n}.xml" for n in "abc"]
        assert parse(body, "trawler").sitemaps == expected
        assert parse(body, "other").sitemaps == expected
        assert parse("Sitemap: https://e.com/s.xml\n", "x").sitemaps == ["https://e.com/s.xml"]

    def test_many_sitemaps(self) -> None:
        lines = [b"Sitemap: https://example.com/s%06d.xml\n" % i for i in range(12_000)]
        start = time.perf_counter()
        sitemaps = parse(b"".join(lines + lines[:100]), "x").sitemaps  # 100 duplicates
        assert time.perf_counter() - start < 5
        assert len(sitemaps) == 12_000
        assert sitemaps[-1] == "https://example.com/s011999.xml"

    def test_sitemap_value_is_not_escaped(self) -> None:
        body = "Sitemap: https://example.com/carte-é.xml\n"
        assert parse(body, "x").sitemaps == ["https://example.com/carte-é.xml"]


# --- §5 examples -------------------------------------------------------------------


class TestRfcExamples:
    # RFC 9309 §5.1, verbatim (including the "EOF" marker line, which is garbage).
    SIMPLE = """\
User-Agent: *
Disallow: *.gif$
Disallow: /example/
Allow: /publications/

User-Agent: foobot
Disallow:/
Allow:/example/page.html
Allow:/example/allowed.gif

User-Agent: barbot
User-Agent: bazbot
Disallow: /example/page.html

User-Agent: quxbot

EOF
"""

    @pytest.mark.parametrize(
        "agent, path, expected",
        [
            ("otherbot", "/publications/", True),
            ("otherbot", "/publications/a.gif", True),  # Allow is longer than *.gif$
            ("otherbot", "/example/", False),
            ("otherbot", "/images/cat.gif", False),
            ("otherbot", "/images/cat.gif?x", True),
            ("otherbot", "/index.html", True),
            ("foobot", "/example/page.html", True),
            ("foobot", "/example/allowed.gif", True),
            ("foobot", "/example/other.html", False),
            ("foobot", "/", False),
            ("barbot", "/example/page.html", False),
            ("barbot", "/example/page.html?x=1", False),
            ("barbot", "/example/other.html", True),
            ("barbot", "/images/cat.gif", True),
            ("bazbot", "/example/page.html", False),
            ("bazbot", "/example/", True),
            ("quxbot", "/example/page.html", True),
            ("quxbot", "/images/cat.gif", True),
        ],
    )
    def test_simple_example(self, agent: str, path: str, expected: bool) -> None:
        assert allowed(self.SIMPLE, agent, path) is expected

    def test_simple_example_explained(self) -> None:
        other = parse(self.SIMPLE, "otherbot")
        assert other.explain(HOST + "/img/a.gif") == Verdict(False, "Disallow: *.gif$", 2, "*")
        foo = parse(self.SIMPLE, "FooBot/1.0")
        assert foo.explain(HOST + "/example/page.html") == Verdict(
            True, "Allow: /example/page.html", 8, "foobot"
        )
        baz = parse(self.SIMPLE, "bazbot")
        assert baz.explain(HOST + "/x") == Verdict(True, None, None, "barbot, bazbot")
        assert parse(self.SIMPLE, "quxbot").explain(HOST + "/x").group == "quxbot"

    @pytest.mark.parametrize(
        "path, expected",
        [
            ("/example/page/disallowed.gif", False),
            ("/example/page/", True),
            ("/example/page/index.html", True),
        ],
    )
    def test_longest_match_example(self, path: str, expected: bool) -> None:
        # RFC 9309 §5.2.
        body = "User-Agent: foobot\nAllow: /example/page/\nDisallow: /example/page/disallowed.gif\n"
        assert allowed(body, "foobot", path) is expected


# --- explain() and the records ------------------------------------------------------


class TestExplain:
    BODY = (
        "User-agent: *\n"
        "Disallow: /\n"
        "\n"
        "User-agent: Trawler\n"
        "User-agent: OtherBot\n"
        "Disallow: /private/  # keep out\n"
        "Allow: /private/ok\n"
    )

    @pytest.mark.parametrize(
        "path, verdict",
        [
            ("/private/x", Verdict(False, "Disallow: /private/", 6, "Trawler, OtherBot")),
            ("/private/ok", Verdict(True, "Allow: /private/ok", 7, "Trawler, OtherBot")),
            ("/public", Verdict(True, None, None, "Trawler, OtherBot")),
            ("/robots.txt", Verdict(True, None, None, "Trawler, OtherBot")),
        ],
    )
    def test_explain(self, path: str, verdict: Verdict) -> None:
        rules = parse(self.BODY, "Trawler/0.1 (+https://github.com/trawler-crawler/trawler)")
        assert rules.explain(HOST + path) == verdict
        assert rules.allowed(HOST + path) is verdict.allowed

    def test_star_group_label(self) -> None:
        rules = parse(self.BODY, "SomeBot")
        assert rules.explain(HOST + "/x") == Verdict(False, "Disallow: /", 2, "*")

    def test_verdict_is_a_slotted_dataclass(self) -> None:
        assert dataclasses.is_dataclass(Verdict)
        assert hasattr(Verdict, "__slots__")


class TestSpeed:
    BODY = (
        "User-agent: *\n"
        + "".join(
            f"Disallow: /{name}/\n"
            for name in ("admin", "cart", "checkout", "account", "search", "private", "tmp")
            + ("cgi-bin", "wp-admin", "print", "api", "login", "logout", "register", "static/x")
        )
        + "Disallow: /*?sessionid=\nDisallow: /*.pdf$\nAllow: /wp-admin/admin-ajax.php\n"
    )

    def test_allowed_is_fast(self) -> None:
        rules = parse(self.BODY, "trawler")
        url = HOST + "/blog/2024/05/some-article-title?page=2"
        n = 20_000
        best = min(_time_calls(rules, url, n) for _ in range(3))
        # Target is < 5 µs; this bound is loose so a busy CI box does not flake.
        assert best / n < 50e-6


def _time_calls(rules: Rules, url: str, n: int) -> float:
    start = time.perf_counter()
    for _ in range(n):
        rules.allowed(url)
    return time.perf_counter() - start
