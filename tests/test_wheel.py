"""What a Pulumi user gets from `pip install`: both wheels (gemma4-t4 and the clamp it pins) into an empty
virtualenv outside this checkout, resolved from the index as any user's would be; then the Python example
(examples/python: two GceT4Servers on the program's own network, a SageMakerT4Endpoint through an explicit
AWS provider) runs under the kind of mocks a user writes, and the guest it renders is the stack program's.
The installed CLI plans the shipped stacks from an empty directory."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import REPO

from gemma4_t4 import clouds

pytestmark = [pytest.mark.build, pytest.mark.index]

# A user's unit test of the example, as Pulumi's testing guide writes one: mocks that echo the inputs and
# answer the provider functions the components call. getRegion answers with the region of the provider it is
# asked through, as the AWS provider's aws_region data source does without arguments (it reads its own
# configuration: terraform-provider-aws, internal/service/meta/region_data_source.go). getDisk answers that no
# retained disk exists as the provider does, with an error (source: terraform-provider-google,
# data_source_google_compute_disk.go:58-59 at e03b7622, `fmt.Errorf("%s not found", id)`; an answer of {}
# is refused), as a mock fails an invoke: with a failure, which the SDK raises as "invoke of TOKEN failed: ...".
RUNNER = '''
import json, runpy, sys
import pulumi

providers, registered = {}, []

class Mocks(pulumi.runtime.Mocks):
    def new_resource(self, args):
        registered.append({"type": args.typ, "name": args.name, "inputs": args.inputs})
        if args.typ.startswith("pulumi:providers:"):
            providers[args.name] = args.inputs
        return [args.name + "-id", {**args.inputs, "name": args.inputs.get("name", args.name),
                                    "arn": "arn:aws:x:us-east-2:123456789012:" + args.name,
                                    "repositoryUrl": "123456789012.dkr.ecr.us-east-2.amazonaws.com/" + args.name,
                                    "stdout": "2030-01-01T00:00:00Z"}]

    def call(self, args):
        if args.token == "aws:index/getRegion:getRegion":
            name = args.provider.split("::")[3]
            return {"name": providers[name]["region"], "region": providers[name]["region"]}
        if args.token == "gcp:compute/getDisk:getDisk":
            # A mock fails an invoke by returning (result, [(property, reason)]); raising would crash the program.
            return {}, [("", "projects/my-project/zones/%s/disks/%s not found" % (args.args["zone"], args.args["name"]))]
        return {}

pulumi.runtime.set_mocks(Mocks(), project="two-servers", stack="test", preview=False)

@pulumi.runtime.test
def run():
    runpy.run_path("__main__.py", run_name="__main__")
    return pulumi.Output.from_input(1)

run()
print(json.dumps(registered, default=str))
'''


def _run(*cmd: str, **kwargs) -> subprocess.CompletedProcess:
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=1200, **kwargs)
    assert done.returncode == 0, f"{' '.join(cmd)}:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    return done


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """An empty virtualenv outside the checkout with the two wheels and what they pin, from the index."""
    work = tmp_path_factory.mktemp("user")
    dist = work / "dist"
    _run(sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", str(dist), str(REPO / "turing"),
         str(REPO))
    uv = shutil.which("uv", path=str(os.path.dirname(sys.executable)))
    env = {**os.environ, "UV_SYSTEM_CERTS": "1"}  # the system's trust store, as pip uses
    _run(uv, "venv", "--quiet", "--python", sys.executable, str(work / "venv"), env=env)
    python = work / "venv" / "bin" / "python"
    _run(uv, "pip", "install", "--quiet", "--python", str(python), *map(str, sorted(dist.glob("*.whl"))), env=env)
    return work, python


def test_the_wheels_install_the_package_and_its_data_and_nothing_named_after_the_folders(installed):
    work, python = installed
    found = json.loads(_run(str(python), "-c", "import json, importlib.resources as r, gemma4_t4, turing_clamp; "
                            "print(json.dumps([gemma4_t4.__file__, (r.files('gemma4_t4.cloudinit') / 'bootstrap.sh')"
                            ".is_file(), (r.files('gemma4_t4.turing') / 'Dockerfile').is_file(), "
                            "(r.files('gemma4_t4.components') / 'schema.json').is_file()]))", cwd=work).stdout)
    # The test's temporary folder may sit under the checkout (CI sets TMPDIR there): what matters is that
    # the import resolves inside the venv, not to the checkout's gemma4_t4/.
    assert Path(found[0]).is_relative_to(work / "venv") and all(found[1:])
    for name in ("components", "cloudinit"):
        assert _run(str(python), "-c", f"import importlib.util as u; print(u.find_spec('{name}') is None)",
                    cwd=work).stdout.strip() == "True"


def test_a_users_program_builds_two_servers_and_an_endpoint_under_mocks(installed):
    work, python = installed
    program = work / "program"
    shutil.copytree(REPO / "examples" / "python", program, ignore=shutil.ignore_patterns("venv"))
    (program / "run_mocks.py").write_text(RUNNER)
    registered = json.loads(_run(str(python), "run_mocks.py", cwd=program).stdout.splitlines()[-1])
    vms = {r["name"]: r["inputs"] for r in registered if r["type"] == "gcp:compute/instance:Instance"}
    assert sorted(vms) == ["batch", "chat"] and len({vm["name"] for vm in vms.values()}) == 2, "names collide"
    assert {r["type"] for r in registered} >= {"gemma4-t4:index:GceT4Server", "gemma4-t4:index:SageMakerT4Endpoint"}
    assert not [r for r in registered if r["type"] == "gcp:compute/network:Network" and r["name"] != "llm-net"], (
        "the servers use the program's network")
    # The guest is the stack program's for the same values.
    stack = clouds.offline_plan("gce-t4", clouds.stack_config("gce-t4", ["zone=us-central1-a", "maxModelLen=8192"],
                                                              REPO))
    assert vms["chat"]["metadata"]["user-data"] == stack.one("gcp:compute/instance:Instance").inputs["metadata"][
        "user-data"]


# The same program's test with the package's own mocks (gemma4_t4.testing, from the installed wheel).
PROVIDER_MOCKS_RUNNER = '''
import json, runpy
import pulumi
from gemma4_t4.testing import ProviderMocks

registered = []

class Recording(ProviderMocks):
    def new_resource(self, args):
        registered.append(args.typ)
        return super().new_resource(args)

pulumi.runtime.set_mocks(Recording(), project="two-servers", stack="test", preview=False)

@pulumi.runtime.test
def run():
    runpy.run_path("__main__.py", run_name="__main__")
    return pulumi.Output.from_input(1)

run()
print(json.dumps(registered))
'''


def test_the_installed_testing_module_builds_the_users_program(installed):
    work, python = installed
    program = work / "program-provider-mocks"
    shutil.copytree(REPO / "examples" / "python", program, ignore=shutil.ignore_patterns("venv"))
    (program / "run_mocks.py").write_text(PROVIDER_MOCKS_RUNNER)
    registered = json.loads(_run(str(python), "run_mocks.py", cwd=program).stdout.splitlines()[-1])
    assert {"gemma4-t4:index:GceT4Server", "gemma4-t4:index:SageMakerT4Endpoint"} <= set(registered)


@pytest.mark.parametrize("stack", ["gce-t4", "sagemaker-t4"])
def test_the_installed_cli_plans_the_shipped_stacks_from_an_empty_directory(installed, stack):
    work, python = installed
    empty = work / f"empty-{stack}"
    empty.mkdir()
    plan = json.loads(_run(str(python), "-m", "gemma4_t4", "plan", stack, "--json", cwd=empty).stdout)
    assert plan["outputs"]["cloud"] == stack.split("-")[0] and plan["running_usd_per_hour"] > 0
    cost = json.loads(_run(str(python), "-m", "gemma4_t4", "cost", stack, "--json", cwd=empty).stdout)
    assert cost["running_usd_per_hour"] == plan["running_usd_per_hour"]
    preset = yaml.safe_load((REPO / f"Pulumi.{stack}.yaml").read_text())["config"]
    assert all(str(v) in json.dumps(plan) for v in preset.values())
