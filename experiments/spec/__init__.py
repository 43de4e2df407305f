"""The experiment spec: the typed model a YAML spec validates into (:mod:`.experiment`), its
pipeline entries (:mod:`.pipeline_spec`), execution settings (:mod:`.execution`), stores
(:mod:`.stores`), files a spec names (:mod:`.files`), command-line overrides (:mod:`.overrides`)
and the strict model base (:mod:`.strict`)."""
