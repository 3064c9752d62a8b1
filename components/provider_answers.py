"""What the providers' lookups answer, word for word, with where each text comes from: how a failed invoke
reaches the program (here), and each cloud's own answers in its room (components/gce/provider_answers.py,
components/sagemaker/provider_answers.py).

The components look things up through provider invokes (the one path a user's Pulumi mocks can answer),
and an invoke's failure reaches the program as text only. So "absent" is read from the provider's exact
answer for a missing object, and anything else (a permission error, a quota, a network failure) is an
error: never "absent", which would create a second disk or repository over a kept one. The plan's own
mocks (gemma4_t4/clouds/) answer with these same texts, so a test of the component meets the real answer.

How a failed invoke reaches the Python program (every hop cited):
- the provider's data source returns an error; pulumi-terraform-bridge joins its diagnostics with
  go-multierror (pkg/tfshim/sdk-v2/diagnostics.go `errors`, at 59de6c66) into "1 error occurred:\\n\\t* MSG\\n\\n"
  and wraps it as "invoking TOKEN: ..." (pkg/tfbridge/provider.go `Invoke`, `errors.Wrapf(err, "invoking %s",
  tok)`, at 59de6c66);
- the engine wraps that as "invocation of TOKEN returned an error: ..." (pulumi/pulumi
  pkg/resource/deploy/source_eval.go, `resmon.Invoke`);
- the Python SDK raises Exception("invoke of TOKEN failed: " + the gRPC details) (pulumi 3.272.0,
  pulumi/runtime/invoke.py `do_invoke`, with settings.grpc_error_to_exception).
"""

from __future__ import annotations

import json
from typing import Any


def engine_error(token: str, error: str) -> str:
    """A provider's invoke error as the engine hands it to the program (the module's hop 2)."""
    return f"invocation of {token} returned an error: {error}"


def engine_failure(token: str, message: str) -> str:
    """The details of a failed invoke of a bridged provider as the engine hands them to the program (the module's
    hops 1 and 2)."""
    return engine_error(token, f"invoking {token}: 1 error occurred:\n\t* {message}\n\n")


# pulumi-command's local run (1.2.1): the command runs on every preview and `up` that reaches it.
RUN = "command:local:run"


def run_answer(args: dict[str, Any], stdout: str, stderr: str) -> dict[str, Any]:
    """What pulumi-command answers for a local run that exited 0: its inputs, with the command's stdout and stderr,
    each without its last newline (pulumi/pulumi-command v1.2.1 provider/pkg/provider/local/runController.go,
    Run.Invoke: RunOutputs{RunInputs: input} and run's BaseOutputs; commandOutputs.go, run:
    strings.TrimSuffix(stdoutbuf.String(), "\n"))."""
    return {**args, "stdout": stdout.removesuffix("\n"), "stderr": stderr.removesuffix("\n")}


def run_failure(command: str, status: int, output: str) -> str:
    """The details of a local run that exited STATUS, as the engine hands them to the program. pulumi-command
    v1.2.1 (commandOutputs.go, run) returns `fmt.Errorf("%w: running %q:\n%s", err, command, stdouterrbuf)`: os/exec's
    ExitError ("exit status N"), the command Go-quoted, then stdout and stderr as the command wrote them; the
    invoke returns that error as it is (pulumi-go-provider v1.3.0 infer/function.go and provider.go, Invoke), and
    the engine wraps it (hop 2)."""
    # Go's %q (strconv.Quote) writes a printable string as JSON does: quotes, with \" and \\ escaped.
    return engine_error(RUN, f"exit status {status}: running {json.dumps(command, ensure_ascii=False)}:\n{output}")


def provider_message(error: BaseException) -> str:
    """The provider's own message out of the engine's and the bridge's wrapping."""
    text = str(error)
    return text.split("\t* ", 1)[1].strip() if "\t* " in text else text.strip()


# A Pulumi mock (pulumi.runtime.Mocks.call) can fail an invoke only by returning (result, [(property,
# reason)]): the SDK then raises "invoke of TOKEN failed: REASON (PROPERTY)" (pulumi/runtime/invoke.py). A
# mock that raises instead crashes the program. So the provider's message is matched at the end of the text,
# or before that one suffix.
END_OF_ANSWER = r"(?: \(\w*\))?$"
# What a program's unit tests use instead of mocks that answer otherwise (Pulumi's documented generic ones:
# new_resource -> [name + "_id", inputs], call -> {}): the project's mocks, which answer as the providers do.
USE_PROVIDER_MOCKS = ("under Pulumi's unit-test mocks, use the ones that answer as the providers do: "
                      "pulumi.runtime.set_mocks(gemma4_t4.testing.ProviderMocks(), preview=False)")
