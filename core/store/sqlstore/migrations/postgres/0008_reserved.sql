-- Reserved for the kinds branch (issue 10), which adds its own 0008; when
-- the branches merge, this placeholder is deleted in favour of that file.
SELECT 1;
