"""Loading OpenCode's config files (locations, merge order, JSONC, substitution, errors), resolving
models from them, and agent definitions."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from opencode_session.core.agents import BUILD_PROMPT, AgentNotFoundError, list_agents, resolve_agent
from opencode_session.core.config import (
    ACTED_ON_KEYS,
    NOT_ACTED_ON,
    Config,
    ConfigError,
    global_config_dir,
    inspect_config,
    key_offsets,
    load_config,
    parse_jsonc,
    project_config_disabled,
)
from opencode_session.core.instructions import discover_instruction_paths
from opencode_session.core.llm import ModelCost, NoModelConfiguredError, ProviderError, Usage, resolve_model, step_cost
from opencode_session.core.llm.catalog import catalog
from opencode_session.core.location import resolve_location
from opencode_session.schema.common import ModelRef


def write(path: Path, content: str | dict) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(content if isinstance(content, str) else json.dumps(content))
    return path


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / ".git").mkdir(parents=True)
    (root / "pkg" / "sub").mkdir(parents=True)
    return root


def env(**extra: str) -> dict[str, str]:
    return {**os.environ, **extra}


# ---------------------------------------------------------------------------------------------
# Locations and merge order.


def test_global_then_project_files_nearer_files_win(project: Path):
    gdir = global_config_dir(os.environ)
    assert gdir == Path(os.environ["XDG_CONFIG_HOME"]) / "opencode"
    write(gdir / "config.json", {"model": "a/from-config-json", "small_model": "a/small", "instructions": ["g.md"]})
    write(gdir / "opencode.json", {"model": "a/from-global-json"})
    write(gdir / "opencode.jsonc", '{"provider": {"p": {"options": {"baseURL": "http://global/v1", "apiKey": "k"}}}}')
    write(project / "opencode.json", {"model": "a/from-root", "provider": {"p": {"options": {"baseURL": "http://root/v1"}}},
                                      "instructions": ["root.md"]})
    write(project / "pkg" / "opencode.jsonc", '{"default_agent": "plan"}')
    write(project / "pkg" / ".opencode" / "opencode.json", {"model": "a/from-pkg-dot-opencode"})
    write(project / "pkg" / "sub" / "opencode.json", {"tool_output": {"max_lines": 10}})

    config = load_config(project / "pkg" / "sub", resolve_location(project / "pkg" / "sub").project_root)

    assert config.model == "a/from-pkg-dot-opencode"
    assert config.small_model == "a/small"  # untouched keys survive from farther files
    assert config.default_agent == "plan"
    assert config.tool_output is not None and config.tool_output.max_lines == 10
    options = config.provider["p"].options
    assert options.base_url == "http://root/v1" and options.api_key == "k"  # objects merge deeply
    assert config.instructions == ["g.md", "root.md"]


def test_files_below_the_location_and_above_the_project_are_ignored(project: Path):
    write(project.parent / "opencode.json", {"model": "a/outside-project"})
    write(project / "pkg" / "sub" / "opencode.json", {"model": "a/below-location"})
    write(project / "opencode.json", {"model": "a/root"})
    assert load_config(project / "pkg", project).model == "a/root"


def test_the_project_root_is_the_nearest_git_ancestor_or_the_directory_itself(project: Path, tmp_path: Path):
    assert resolve_location(project / "pkg" / "sub").project_root == project.resolve()
    lone = tmp_path / "lone"
    lone.mkdir()
    assert resolve_location(lone).project_root == lone.resolve()


def test_disable_project_config_keeps_global(project: Path):
    write(global_config_dir(os.environ) / "opencode.json", {"model": "a/global"})
    write(project / "opencode.json", {"model": "a/project"})
    assert load_config(project, project).model == "a/project"
    assert load_config(project, project, env(OPENCODE_DISABLE_PROJECT_CONFIG="1")).model == "a/global"
    assert load_config(project, project, env(OPENCODE_DISABLE_PROJECT_CONFIG="TRUE")).model == "a/global"


@pytest.mark.parametrize("value", ["false", "0", "no", ""])
def test_only_true_or_1_disables_project_config_and_it_means_the_same_for_agents_md(project: Path, value: str):
    """OpenCode reads the flag as "true" or "1"; any other value leaves project files on, for the configuration
    and for ambient AGENTS.md alike."""
    write(global_config_dir(os.environ) / "opencode.json", {"model": "a/global"})
    write(project / "opencode.json", {"model": "a/project"})
    (project / "AGENTS.md").write_text("project rules")
    flags = env(OPENCODE_DISABLE_PROJECT_CONFIG=value)
    assert load_config(project, project, flags).model == "a/project"
    assert not project_config_disabled(flags)
    paths = discover_instruction_paths(project, project, global_config_dir(flags), project_config_disabled(flags))
    assert project.resolve() / "AGENTS.md" in paths


def test_opencode_config_env_is_merged_after_global_before_project(project: Path, tmp_path: Path):
    write(global_config_dir(os.environ) / "opencode.json", {"model": "a/global", "small_model": "a/global-small"})
    extra = write(tmp_path / "custom.jsonc", '{"small_model": "a/custom-small", "model": "a/custom"}')
    config = load_config(project, project, env(OPENCODE_CONFIG=str(extra)))
    assert (config.model, config.small_model) == ("a/custom", "a/custom-small")
    write(project / "opencode.json", {"model": "a/project"})
    config = load_config(project, project, env(OPENCODE_CONFIG=str(extra)))
    assert (config.model, config.small_model) == ("a/project", "a/custom-small")


def test_no_files_gives_an_empty_config(project: Path):
    config = load_config(project, project)
    assert config.model is None and config.provider == {} and config.agent == {}


# ---------------------------------------------------------------------------------------------
# Parsing.


def test_jsonc_comments_trailing_commas_and_slashes_in_strings(project: Path):
    write(
        project / "opencode.jsonc",
        """// top comment
{
  /* block
     comment */
  "model": "local/m", // trailing comment
  "provider": {
    "local": {
      "options": {"baseURL": "http://127.0.0.1:8080/v1", "headers": {"X-Note": "a // b /* c */"},},
      "models": {"m": {"limit": {"context": 1000, "output": 100,},},},
    },
  },
  "instructions": ["docs/*.md", "a\\"//b",],
  "custom_unknown_key": {"kept": true},
}
""",
    )
    config = load_config(project, project)
    provider = config.provider["local"]
    assert provider.options.base_url == "http://127.0.0.1:8080/v1"
    assert provider.options.headers == {"X-Note": "a // b /* c */"}
    assert provider.models["m"].limit is not None and provider.models["m"].limit.output == 100
    assert config.instructions == ["docs/*.md", 'a"//b']
    assert config.model_extra == {"custom_unknown_key": {"kept": True}}  # unknown keys are preserved


def test_env_and_file_substitution_in_string_values(project: Path):
    write(project / "prompts" / "build.txt", "Be brief.\n")
    write(
        project / "opencode.json",
        {
            "provider": {"x": {"options": {"apiKey": "{env:X_SECRET}", "baseURL": "http://{env:X_HOST}/v1"}}},
            "agent": {"build": {"prompt": "{file:prompts/build.txt}"}},
            "small_model": "{env:NOT_SET_ANYWHERE}",
        },
    )
    config = load_config(project, project, env(X_SECRET="s3cret", X_HOST="example.test"))
    assert config.provider["x"].options.api_key == "s3cret"
    assert config.provider["x"].options.base_url == "http://example.test/v1"
    assert config.agent["build"].prompt == "Be brief."
    assert config.small_model == ""


def test_malformed_file_reports_path_line_and_column(project: Path):
    bad = write(project / "opencode.jsonc", '{\n  // fine so far\n  "model": "a/b"\n  "small_model": "c/d"\n}\n')
    with pytest.raises(ConfigError) as caught:
        load_config(project, project)
    err = caught.value
    assert err.path == bad
    assert (err.line, err.column) == (4, 3)
    assert f"{bad}:4:3" in str(err)


def test_unterminated_comment_and_wrong_types_are_config_errors(project: Path):
    with pytest.raises(ConfigError) as caught:
        parse_jsonc('{"a": 1}\n/* never closed', "x.jsonc")
    assert (caught.value.line, caught.value.column) == (2, 1)
    with pytest.raises(ConfigError):
        parse_jsonc("[1, 2]", "x.json")
    write(project / "opencode.json", {"agent": {"build": {"steps": "many"}}})
    with pytest.raises(ConfigError) as caught:
        load_config(project, project)
    assert "agent.build.steps" in str(caught.value)


# ---------------------------------------------------------------------------------------------
# Model resolution.


def test_resolve_builtin_openai_model():
    config = Config.model_validate({"model": "openai/gpt-4.1"})
    model = resolve_model(config, None, {"OPENAI_API_KEY": "sk-openai"})
    assert (model.provider_id, model.model_id) == ("openai", "gpt-4.1")
    assert model.base_url == "https://api.openai.com/v1" and model.api_key == "sk-openai"
    assert "sk-openai" not in repr(model)  # keys never reach logs through reprs
    with pytest.raises(NoModelConfiguredError) as caught:
        resolve_model(config, None, {})
    assert "OPENAI_API_KEY" in caught.value.message


def test_resolve_custom_openai_compatible_provider():
    config = Config.model_validate(
        {
            "provider": {
                "my-llm": {
                    "npm": "@ai-sdk/openai-compatible",
                    "name": "My LLM",
                    "options": {"baseURL": "http://10.0.0.5:8000/v1/", "headers": {"X-Team": "core"}, "timeout": 30000},
                    "models": {
                        "qwen/qwen3-coder": {
                            "limit": {"context": 131072, "output": 16384, "input": 120000},
                            "cost": {"input": 0.2, "output": 0.8, "cache_read": 0.02, "cache_write": 0.25},
                        }
                    },
                }
            }
        }
    )
    ref = ModelRef(providerID="my-llm", id="qwen/qwen3-coder")
    model = resolve_model(config, ref, {"MY_LLM_API_KEY": "k-env"})
    assert model.base_url == "http://10.0.0.5:8000/v1"
    assert model.api_key == "k-env" and model.headers == {"X-Team": "core"}
    assert (model.context_limit, model.output_limit, model.input_limit) == (131072, 16384, 120000)
    assert model.cost == ModelCost(0.2, 0.8, 0.02, 0.25)
    assert model.timeout == 30.0
    # "provider/model" strings split at the first slash only.
    config.model = "my-llm/qwen/qwen3-coder"
    assert resolve_model(config, None, {}).model_id == "qwen/qwen3-coder"
    assert resolve_model(config, None, {}).api_key is None  # keyless local servers are fine


def test_missing_model_says_how_to_configure_one():
    with pytest.raises(NoModelConfiguredError) as caught:
        resolve_model(Config(), None, {})
    err = caught.value
    assert not err.retryable
    for hint in ('"model"', "provider/model", "opencode.json", '"npm"', '"baseURL"', '"models"', "_API_KEY"):
        assert hint in err.message, hint
    assert err.to_session_error().type == "provider.no-model"


@pytest.mark.parametrize(
    ("config", "ref", "expected"),
    [
        ({}, ModelRef(providerID="nowhere", id="m"), "'nowhere'"),
        ({"provider": {"anthropic": {"npm": "@ai-sdk/anthropic"}}}, ModelRef(providerID="anthropic", id="c"),
         "ANTHROPIC_API_KEY"),
        ({}, ModelRef(providerID="anthropic", id="claude-sonnet-4-5"), "ANTHROPIC_API_KEY"),
        ({"provider": {"g": {"npm": "@ai-sdk/google", "options": {"baseURL": "http://127.0.0.1:1"}}}},
         ModelRef(providerID="g", id="m"), "not supported"),
        ({"provider": {"loc": {"npm": "@ai-sdk/openai-compatible"}}}, ModelRef(providerID="loc", id="m"),
         "options.baseURL"),
        ({"model": "no-slash"}, None, "provider/model"),
    ],
)
def test_unusable_models_name_what_is_missing(config, ref, expected):
    with pytest.raises(NoModelConfiguredError) as caught:
        resolve_model(Config.model_validate(config), ref, {})
    assert expected in caught.value.message


def test_step_cost_without_prices_is_zero():
    usage = Usage(input=1000, output=10, reasoning=5, cache_read=100, cache_write=7)
    assert step_cost(usage, None) == 0
    assert step_cost(usage, ModelCost(1, 2, 3, 4)) == pytest.approx((1000 + 15 * 2 + 300 + 28) / 1e6)


# ---------------------------------------------------------------------------------------------
# Agents.


def test_builtin_agents():
    config = Config()
    build = resolve_agent(config, None)
    assert build.name == "build" and build.steps is None and build.prompt == BUILD_PROMPT
    assert [a.name for a in list_agents(config)] == ["build", "plan"]
    with pytest.raises(AgentNotFoundError):
        resolve_agent(config, "reviewer")


def test_config_agents_override_add_and_disable(project: Path):
    write(
        project / "opencode.json",
        {
            "default_agent": "review",
            "agent": {
                "build": {"steps": 5, "model": "local/fast", "temperature": 0.2},
                "plan": {"disable": True},
                "review": {"prompt": "Review only.", "description": "Reviews diffs", "mode": "primary",
                           "maxSteps": 3},
                "helper": {"mode": "subagent"},
            },
        },
    )
    config = load_config(project, project)
    build = resolve_agent(config, "build")
    assert build.steps == 5 and build.prompt == BUILD_PROMPT and build.temperature == 0.2
    assert build.model == ModelRef(providerID="local", id="fast")
    with pytest.raises(AgentNotFoundError):
        resolve_agent(config, "plan")
    review = resolve_agent(config, None)  # default_agent
    assert (review.name, review.prompt, review.steps) == ("review", "Review only.", 3)
    assert [a.name for a in list_agents(config)] == ["build", "review", "helper"]


def test_default_agent_falls_back_to_build_for_unknown_or_subagent():
    config = Config.model_validate({"default_agent": "helper", "agent": {"helper": {"mode": "subagent"}}})
    assert resolve_agent(config).name == "build"
    config = Config.model_validate({"default_agent": "missing"})
    assert resolve_agent(config).name == "build"


# ---------------------------------------------------------------------------------------------
# Diagnostics: what a user is told about a config that is wrong or probably wrong.


def test_wrong_type_names_file_line_and_field(project: Path):
    bad = write(project / "opencode.jsonc", '{\n  "model": "a/b",\n  "provider": {\n    "x": {"models": {\n'
                                             '      "m": {"limit": {"context": "big"}}}}}\n}\n')
    report = inspect_config(project, project)
    assert report.config is None and report.files == [bad]
    err = report.error
    assert err is not None and err.path == bad and err.line == 5
    assert f"{bad}:5: provider.x.models.m.limit.context" in str(err)


def test_unknown_top_level_keys_are_flagged_with_a_suggestion(project: Path):
    path = write(project / "opencode.json", '{\n  "modle": "a/b",\n  "provders": {},\n  "$schema": "x",\n'
                                            '  "zzz_custom": 1\n}\n')
    report = inspect_config(project, project)
    assert report.error is None and report.config is not None
    assert [str(w) for w in report.warnings] == [
        f"{path}:2: unknown key 'modle' (did you mean 'model'?)",
        f"{path}:3: unknown key 'provders' (did you mean 'provider'?)",
        f"{path}:5: unknown key 'zzz_custom' (ignored)",
    ]


def test_keys_not_acted_on_are_named_once_each_and_the_table_is_the_only_list_of_them(project: Path):
    write(global_config_dir(os.environ) / "opencode.json", '{\n  "watcher": {},\n  "plugin": []\n}\n')
    path = write(project / "opencode.json", '{\n  "model": "a/b",\n  "watcher": {"x": {}},\n  "lsp": false,\n'
                                            '  "formatter": {},\n  "websearch": {"url": "http://x"}\n}\n')
    report = inspect_config(project, project)
    assert report.error is None and report.warnings == []  # neither unknown nor a typo
    assert sorted(report.ignored) == ["formatter", "lsp", "watcher"]  # `plugin` and `mcp` are acted on
    assert str(report.ignored["lsp"]).startswith(f"{path}:4: key 'lsp' (")
    assert report.ignored["watcher"].path == global_config_dir(os.environ) / "opencode.json"  # where it is first set
    # a key the typed config reads is acted on: implementing one means taking it out of the table
    assert set(Config.model_fields) <= ACTED_ON_KEYS and not ACTED_ON_KEYS & NOT_ACTED_ON.keys()
    assert {"watcher", "formatter", "lsp"} <= NOT_ACTED_ON.keys()
    assert {"snapshot", "command", "references", "plugin", "mcp"} <= ACTED_ON_KEYS


def test_unset_env_variable_is_said_not_silently_empty(project: Path):
    path = write(project / "opencode.json", '{\n  "provider": {"x": {"options": {\n'
                                            '    "apiKey": "{env:NOT_SET_ANYWHERE}"}}}\n}\n')
    report = inspect_config(project, project, env())
    assert report.config is not None and report.config.provider["x"].options.api_key == ""
    assert [str(w) for w in report.warnings] == [
        f"{path}:3: {{env:NOT_SET_ANYWHERE}} names an unset environment variable (it reads as an empty string)"]
    assert inspect_config(project, project, env(NOT_SET_ANYWHERE="k")).warnings == []


def test_key_offsets_locate_nested_keys_and_items():
    text = '{"a": {"b": [1, {"c": "x,}"}]}, "d": true}'
    offsets = key_offsets(text)
    assert text[offsets[("a",)]:].startswith('"a"')
    assert text[offsets[("a", "b", 1, "c")]:].startswith('"c"')
    assert text[offsets[("d",)]:].startswith('"d"')


def test_custom_provider_key_sources_follow_opencode():
    config = Config.model_validate({"provider": {"local": {
        "npm": "@ai-sdk/openai-compatible", "env": ["LOCAL_TOKEN", "OTHER_TOKEN"],
        "options": {"baseURL": "http://127.0.0.1:1/v1"}, "models": {"m": {}}}}})
    ref = ModelRef(providerID="local", id="m")
    # OPENAI_API_KEY belongs to the `openai` provider only, as in OpenCode
    assert resolve_model(config, ref, {"OPENAI_API_KEY": "sk-openai"}).api_key is None
    assert resolve_model(config, ref, {"OTHER_TOKEN": "o", "LOCAL_API_KEY": "p"}).api_key == "o"
    assert resolve_model(config, ref, {"LOCAL_TOKEN": "t", "OTHER_TOKEN": "o"}).api_key == "t"
    assert resolve_model(config, ref, {"LOCAL_API_KEY": "p"}).api_key == "p"
    config.provider["local"].options.api_key = "in-config"
    assert resolve_model(config, ref, {"LOCAL_TOKEN": "t"}).api_key == "in-config"


def test_catalog_lists_configured_models_and_where_keys_come_from():
    config = Config.model_validate({"provider": {
        "local": {"npm": "@ai-sdk/openai-compatible", "options": {"baseURL": "http://127.0.0.1:1/v1"},
                  "models": {"qwen": {"name": "Qwen", "limit": {"context": 32768, "output": 8192}}}},
        "broken": {"npm": "@ai-sdk/openai-compatible", "models": {"m": {}}},
    }})
    listing = {p.id: p for p in catalog(config, {"LOCAL_API_KEY": "k"})}
    assert list(listing) == ["anthropic", "broken", "local", "openai"]
    local = listing["local"]
    assert local.credentials == "LOCAL_API_KEY" and local.problem is None
    [qwen] = local.models
    assert (qwen.ref, qwen.name, qwen.context, qwen.output) == ("local/qwen", "Qwen", 32768, 8192)
    assert "options.baseURL" in (listing["broken"].problem or "")
    assert listing["openai"].credentials is None and "OPENAI_API_KEY" in (listing["openai"].problem or "")
    with_key = {p.id: p for p in catalog(config, {"OPENAI_API_KEY": "sk"})}["openai"]
    assert with_key.credentials == "OPENAI_API_KEY" and with_key.problem is None


@pytest.mark.parametrize(("provider_id", "model_id", "variable", "protocol", "url"), [
    ("openai", "gpt-4o", "OPENAI_API_KEY", "responses", "https://api.openai.com/v1"),
    ("anthropic", "claude-sonnet-4-5", "ANTHROPIC_API_KEY", "messages", "https://api.anthropic.com/v1"),
])
def test_builtin_providers_need_only_their_key(provider_id, model_id, variable, protocol, url):
    model = resolve_model(Config(), ModelRef(providerID=provider_id, id=model_id), env={variable: "sk-env"})
    assert (model.protocol, model.base_url, model.api_key) == (protocol, url, "sk-env")
    assert model.capabilities.tools and model.capabilities.images and model.context_limit
    assert model.cost is not None and model.cost.input > 0 and model.output_limit


def test_config_overrides_and_extends_the_bundled_catalog():
    config = Config.model_validate({"provider": {"anthropic": {"models": {
        "claude-sonnet-4-5": {"limit": {"context": 1000000, "output": 64000}},
        "claude-next": {"name": "Next", "tool_call": True, "modalities": {"input": ["text"]}},
    }}}})
    env = {"ANTHROPIC_API_KEY": "sk"}
    sonnet = resolve_model(config, ModelRef(providerID="anthropic", id="claude-sonnet-4-5"), env=env)
    assert sonnet.context_limit == 1000000
    assert sonnet.cost is not None and sonnet.cost.cache_write == 3.75  # the bundled price survives the override
    nxt = resolve_model(config, ModelRef(providerID="anthropic", id="claude-next"), env=env)
    assert nxt.protocol == "messages" and not nxt.capabilities.images and nxt.cost is None
    with pytest.raises(ProviderError):
        resolve_model(config, ModelRef(providerID="anthropic", id="claude-sonnet-4-5", variant="nope"), env=env)
    high = resolve_model(config, ModelRef(providerID="anthropic", id="claude-sonnet-4-5", variant="high"), env=env)
    assert high.options["thinking"]["budgetTokens"] == 16000 and high.variant == "high"
