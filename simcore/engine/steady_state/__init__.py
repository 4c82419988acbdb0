"""The periodic steady state: simulate an iteration with periods of its steady state left out, check that it
repeats, and put the periods back by arithmetic.

- periodic.py: the extrapolating run: the reduced simulation, its check and the periods put back.
- periods.py: the schedule's pass lists: where a rank's passes repeat, how many periods may be left out.
- watch.py: the watch over the reduced run: when every rank repeats one period, where the cuts go, and the rounding
  the check allows.
"""
