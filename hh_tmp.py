import time
from tabrecon.households import synthesize_households
from tabrecon.synth import SynthConfig
from tabrecon.unit_tables import tabulate_units
from tabrecon.attacks.unit_claims import household_claims
_, units = synthesize_households(SynthConfig(persons=3000), seed=5)
long = tabulate_units(units)
t0=time.perf_counter()
run = household_claims(long, k_values=(2,3,4,5), K=8, seed=1, truth=units, out="/tmp/hhc", resume=False, workers=2, block_seconds=5)
print(time.perf_counter()-t0)
print(run.by_k())
print(run.summary_lines())
print(run.blocks.head())
print(run.write("/tmp/hhc"))
print(open("/tmp/hhc/summary.md").read())
