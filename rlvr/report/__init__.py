"""What reads results: the chapters' claims (`claims`) and the rule that decides them (`verdict`),
the report's document model (`document`) and figures (`plots`), which params made a file
(`provenance`), and the views a researcher asks for: two variants compared (`compare`), one line per
variant (`summary`), a sweep of queued experiments (`sweep`)."""
