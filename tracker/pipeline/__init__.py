"""One run end to end: ``execute`` loads the inputs, runs the suite and stores the run. ``watch``
replays the stored series through the analysis and records the regressions it raises."""
