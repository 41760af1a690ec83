"""The command line, ``python -m bnstudy <verb>``: the verbs (:mod:`.main`), their shared
arguments (:mod:`.args`) and the verbs that read finished results (:mod:`.results`)."""
