"""The examples each command's --help ends with."""

EXAMPLES: dict[str, tuple[str, ...]] = {
    "plan": ("gemma4-t4 plan gce-t4", "gemma4-t4 plan -s sagemaker-t4 --config gemma4-t4:maxModelLen=8192 --json"),
    "preflight": ("gemma4-t4 preflight gce-t4", "gemma4-t4 preflight -s gce-t4 --all-regions",
                  "gemma4-t4 preflight sagemaker-t4 --all-regions --regions us-east-1,us-west-2"),
    "cost": ("gemma4-t4 cost gce-t4", "gemma4-t4 cost -s sagemaker-t4 --json"),
    "zones": ("gemma4-t4 zones", "gemma4-t4 zones --cloud gce --json"),
    "fit": ("gemma4-t4 fit", "gemma4-t4 fit --strict --json"),
    "status": ("gemma4-t4 status -s gce-t4", "gemma4-t4 status --url http://127.0.0.1:8000/v1 --json",
               "gemma4-t4 status --endpoint gemma4-t4-endpoint --region us-east-1"),
    "wait": ("gemma4-t4 wait -s gce-t4", "gemma4-t4 wait -s sagemaker-t4 --timeout 1200 --interval 30"),
    "query": ("gemma4-t4 query -s gce-t4 'Why is the sky blue?'",
              "gemma4-t4 query --url http://127.0.0.1:8000 'hello' --max-tokens 32 --json"),
    "logs": ("gemma4-t4 logs -s gce-t4 --lines 50", "gemma4-t4 logs -s sagemaker-t4 --follow"),
    "bench": ("gemma4-t4 bench run -s gce-t4 --out run.json",
              "gemma4-t4 bench compare before.json after.json --plot charts/"),
    "bench run": ("gemma4-t4 bench run -s gce-t4 --out run.json --plot charts/",
                  "gemma4-t4 bench run --url http://127.0.0.1:8000 --short 16 --long 128 --questions 5"),
    "bench compare": ("gemma4-t4 bench compare before.json after.json",),
    "stop": ("gemma4-t4 stop -s gce-t4", "gemma4-t4 stop --instance NAME --zone us-west2-b --project PROJECT"),
    "start": ("gemma4-t4 start -s gce-t4 && gemma4-t4 wait -s gce-t4",),
    "mcp": ("gemma4-t4 mcp", "gemma4-t4 mcp --transport streamable-http --port 8765"),
}
