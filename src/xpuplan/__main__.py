from xpuplan.cli.main import run

run()
