"""`gpuscale-tui check`: is this (rented) box fit for a fair run? Facts (facts.py) are read by
nvml_facts.py, host_facts.py and a CUDA child (measure.py); verdicts.py judges them (pure);
run.py puts it together into one BoxCheck event; render.py prints it."""
