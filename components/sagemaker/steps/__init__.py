"""The SageMaker component's local steps (pulumi-command Commands that `pulumi up` runs by name: `python -m
gemma4_t4.step NAME`, components/step.py), one module each: its request (a StepRequest the component writes to the
Command's environment and the step reads back), the `create` that runs it (``command()``), and its main through
components/step.py's runner.

- account_check: the CodeBuild and endpoint quotas, before anything bills;
- build: the image built by CodeBuild (imageBuilder codebuild), its digest on stdout;
- local_build: the same image built on this machine (imageBuilder local, buildah, podman or docker);
- endpoint_watch: beside the endpoint's creation, a failed endpoint's reason printed and the endpoint deleted;
- created_at: the endpoint's CreationTime, the TTL's clock, read on every run of the program (a local run invoke);
- ttl_passed: a deadline moved into the past (a lowered endpointTtl) deletes the endpoint now;
- single_fleet: fleetChange single, the old fleet's endpoint deleted before the new one is created.
"""
