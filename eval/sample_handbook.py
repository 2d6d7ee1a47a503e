"""The sample employee handbook's content: the blocks :mod:`eval.sample_render` lays out (see there for the
block kinds). Its facts, with the anchors they name, are in :mod:`eval.sample_pdfs`."""

from __future__ import annotations

from typing import Any

HANDBOOK_TITLE = "Halvorsen & Pike Engineering Ltd. \u2014 Employee Handbook"

HANDBOOK_BLOCKS: list[tuple[Any, ...]] = [
    ("title", "Employee Handbook", "Halvorsen & Pike Engineering Ltd.", "Version 6.2 \u2014 effective 1 March 2024"),
    ("h1", "1 Introduction"),
    ("anchor", "hb_intro"),
    (
        "p",
        "Halvorsen & Pike Engineering Ltd. was founded in 1994 in Leeds by Astrid Halvorsen and Graham Pike "
        "as a structural engineering consultancy. Today the company employs 1,240 people across offices in "
        "Leeds, Manchester, Bristol and Aberdeen and designs bridges, offshore platforms and industrial "
        "facilities for clients in eleven countries.",
    ),
    (
        "p",
        "This handbook explains the policies, entitlements and responsibilities that apply to every employee. "
        "It forms part of your contract of employment where your offer letter says so, and it is reviewed "
        "every year by the People Team together with the Employee Consultation Forum. Where a local agreement "
        "or a statutory requirement gives you a better entitlement than this handbook, the better entitlement "
        "applies.",
    ),
    ("h2", "1.1 Who to contact"),
    (
        "p",
        "Questions about this handbook go to the People Team at people@halvorsenpike.example or on internal "
        "extension 2100. Questions about pay go to the Payroll Office on extension 2150. Your line manager is "
        "always the first person to talk to about day-to-day arrangements.",
    ),
    ("h2", "1.2 Changes to this handbook"),
    (
        "p",
        "Changes are announced at least 30 days before they take effect, except where a change is required by "
        "law. The current version is always published on the intranet; printed copies are not controlled "
        "documents.",
    ),
    ("pagebreak",),
    ("h1", "2 Working Hours"),
    ("anchor", "hb_hours"),
    (
        "p",
        "The standard working week is 37.5 hours, Monday to Friday. Core hours are 10:00 to 15:00, when all "
        "full-time employees are expected to be available unless they are on leave or have agreed otherwise "
        "with their line manager. Outside core hours employees may choose when to start and finish their "
        "working day between 07:00 and 19:00.",
    ),
    ("h2", "2.1 Flexitime"),
    (
        "p",
        "Time worked above or below the standard week is recorded in the flexitime system. A credit of up to "
        "20 hours may be carried over from one month to the next; any credit above 20 hours is lost at the "
        "end of the month unless your line manager approved the overtime in advance. A debit of more than 10 "
        "hours must be made up within the following month.",
    ),
    ("h2", "2.2 Overtime"),
    (
        "p",
        "Approved overtime for employees at grades E1 to E4 is paid at one and a half times the normal hourly "
        "rate on weekdays and twice the normal hourly rate on Sundays and public holidays. Employees at grade "
        "E5 and above receive time off in lieu instead of overtime pay.",
    ),
    ("pagebreak",),
    ("h1", "3 Pay and Benefits"),
    ("anchor", "hb_pay"),
    (
        "p",
        "Salaries are paid monthly by bank transfer on the 25th day of each month, or on the previous working "
        "day when the 25th falls on a weekend or a public holiday. Payslips are available in the payroll "
        "portal two working days before payment.",
    ),
    ("h2", "3.1 Pension"),
    (
        "p",
        "All employees are enrolled in the Halvorsen & Pike Group Pension Plan. The company contributes 7% of "
        "basic salary when the employee contributes at least 4%. Employees may opt out within one month of "
        "enrolment and receive a full refund of their own contributions.",
    ),
    ("h2", "3.2 Health cover and life assurance"),
    (
        "p",
        "Private medical insurance is provided for employees and their dependent children after the "
        "probationary period. Life assurance pays four times basic salary to your nominated beneficiaries. "
        "The annual salary review takes effect on 1 April each year.",
    ),
    ("pagebreak",),
    ("h1", "4 Leave"),
    (
        "p",
        "This section describes annual leave, parental leave, sick leave and bereavement leave. Leave is "
        "requested and approved in the HR portal; your line manager responds to a request within five working "
        "days.",
    ),
    ("h2", "4.1 Annual leave"),
    ("anchor", "hb_annual"),
    (
        "p",
        "The leave year runs from 1 January to 31 December. Your annual leave entitlement grows with your "
        "years of continuous service, as shown in Table 1, and is in addition to the eight public holidays. "
        "Up to 5 days of unused leave may be carried over into the next leave year and must be taken by 31 "
        "March.",
    ),
    (
        "table",
        "Table 1: Annual leave by years of service",
        [
            ["Years of service", "Annual leave (days)", "Extra days bought or sold (max)"],
            ["0 to 2", "25", "3"],
            ["3 to 5", "27", "3"],
            ["6 to 9", "29", "5"],
            ["10 or more", "31", "5"],
        ],
    ),
    ("pagebreak",),
    ("h2", "4.2 Parental leave"),
    ("anchor", "hb_parental"),
    (
        "p",
        "An employee who is the primary carer of a newborn or newly adopted child is entitled to 26 weeks of "
        "parental leave on full pay, followed by up to 26 further weeks of unpaid leave. The secondary carer "
        "is entitled to 6 weeks of parental leave on full pay, which may be taken in up to three separate "
        "blocks within the first year.",
    ),
    (
        "p",
        "Parental leave should be notified to the People Team at least 15 weeks before the expected week of "
        "childbirth or placement. Keeping-in-touch days, up to a maximum of 10, may be worked during parental "
        "leave without ending it.",
    ),
    ("h2", "4.3 Sick leave"),
    ("anchor", "hb_sick"),
    (
        "p",
        "If you are ill, tell your line manager before 09:30 on the first day of absence. You may self-certify "
        "absences of up to 7 calendar days; for longer absences a fit note from a doctor is required. Company "
        "sick pay is full pay for the first 12 weeks of absence in any rolling twelve-month period.",
    ),
    ("h2", "4.4 Bereavement leave"),
    ("anchor", "hb_bereavement"),
    (
        "p",
        "Employees receive 10 days of paid bereavement leave on the death of a partner, child, parent or "
        "sibling, and 3 days on the death of another close relative.",
    ),
    ("pagebreak",),
    ("h1", "5 Remote Work"),
    ("anchor", "hb_remote"),
    (
        "p",
        "Employees whose role allows it may work remotely for up to 3 days per week, agreed with their line "
        "manager. Remote work must be done from the United Kingdom; working from abroad for more than 10 "
        "working days per year requires written approval from the People Team and the Tax Office.",
    ),
    (
        "p",
        "The company provides a laptop, a monitor and a headset for remote work. A monthly stipend towards "
        "home office costs is paid with the salary; its amount and start date are set by the memorandum "
        "reproduced on the next page.",
    ),
    ("h2", "5.1 Equipment and security at home"),
    (
        "p",
        "Company equipment must not be used by other members of your household. Confidential drawings must not "
        "be printed at home. Use the company VPN for all work; public Wi-Fi networks may only be used through "
        "the VPN.",
    ),
    (
        "scan",
        [
            "HALVORSEN & PIKE ENGINEERING LTD.",
            "",
            "MEMORANDUM",
            "",
            "To: All employees",
            "From: Ingrid Solberg, Chief People Officer",
            "Date: 14 June 2024",
            "Subject: Remote work stipend",
            "",
            "From 1 July 2024 every employee who works remotely",
            "at least one day per week receives a remote work",
            "stipend of 45 pounds per month, paid with the salary.",
            "",
            "The stipend replaces the one-off home office grant.",
            "Claims for furniture are no longer reimbursed.",
            "Part-time employees receive the full stipend.",
            "",
            "Questions go to the People Team on extension 2100.",
            "",
            "Signed: Ingrid Solberg",
        ],
    ),
    ("twocol",),
    ("h1", "6 Travel and Expenses"),
    ("anchor", "hb_travel"),
    (
        "p",
        "Business travel must be booked through the travel desk at least 14 days in advance where possible. "
        "Standard class rail travel is the default for journeys within the United Kingdom; first class is "
        "allowed for journeys longer than three hours.",
    ),
    (
        "p",
        "Employees who use their own car for business journeys are reimbursed at a mileage rate of 45 pence "
        "per mile for the first 10,000 miles in a tax year and 25 pence per mile after that. Parking and tolls "
        "are reimbursed at cost.",
    ),
    (
        "p",
        "Hotel costs are reimbursed up to 160 pounds per night in London and 110 pounds per night elsewhere in "
        "the United Kingdom, including breakfast. Higher rates need the prior approval of a director.",
    ),
    ("columnbreak",),
    ("anchor", "hb_travel_col2"),
    (
        "p",
        "A meal allowance of 38 pounds per day is paid for each full day spent travelling on company business. "
        "Alcohol is never reimbursed, including when entertaining clients.",
    ),
    (
        "p",
        "Expense claims are submitted in the expenses portal with an itemised receipt for every item and must "
        "be submitted within 60 days of the expense; later claims are only paid with the approval of the "
        "Finance Director.",
    ),
    (
        "p",
        "Corporate cards are issued to employees who travel more than six times a year. Personal spending on "
        "a corporate card is a disciplinary matter.",
    ),
    ("onecol",),
    ("h1", "7 Company Performance"),
    ("anchor", "hb_perf"),
    (
        "p",
        "The company publishes its key figures to all employees every year after the annual accounts are "
        "approved. Revenue fell in 2020 during the pandemic and recovered strongly in the following two years. "
        "Table 2 shows revenue and headcount over the last six financial years.",
    ),
    (
        "table",
        "Table 2: Revenue and headcount by year, 2018-2023",
        [
            ["Year", "Revenue (GBP million)", "Headcount at year end", "Offices"],
            ["2018", "84.2", "910", "3"],
            ["2019", "91.5", "985", "3"],
            ["2020", "78.9", "940", "3"],
            ["2021", "102.3", "1,050", "4"],
            ["2022", "118.6", "1,180", "4"],
            ["2023", "112.4", "1,240", "4"],
        ],
    ),
    (
        "p",
        "The profit-sharing pool is 6% of operating profit and is shared equally between all employees who "
        "were employed for the whole financial year.",
    ),
    ("pagebreak",),
    ("h1", "8 Code of Conduct"),
    ("anchor", "hb_conduct"),
    (
        "p",
        "Every employee is expected to act honestly, treat colleagues and clients with respect and protect the "
        "reputation of the company. In particular, employees must follow these rules:",
    ),
    (
        "bullets",
        [
            "Gifts or hospitality worth more than 50 pounds must be declared in the gifts register.",
            "Conflicts of interest must be declared to your line manager within 5 working days.",
            "Never offer or accept a payment to influence a business decision.",
            "Use company social media accounts only when authorised by Communications.",
            "Report suspected fraud to the confidential ethics line on extension 2999.",
        ],
    ),
    (
        "p",
        "A breach of the code of conduct may lead to disciplinary action under Section 12 of this handbook.",
    ),
    ("pagebreak",),
    ("h1", "9 Health and Safety"),
    ("anchor", "hb_safety"),
    (
        "p",
        "In the event of a fire alarm, leave the building by the nearest exit and go to the assembly point in "
        "car park B. Do not use the lifts. Fire wardens wear yellow vests and check that each floor is empty.",
    ),
    (
        "p",
        "Every office has at least one qualified first aider for every 50 employees. Accidents and near misses "
        "must be reported in the safety portal within 24 hours. Site visits require a completed risk "
        "assessment and the personal protective equipment listed in it.",
    ),
    ("h2", "9.1 Display screen equipment"),
    (
        "p",
        "Employees who use a computer for more than one hour a day are entitled to a workstation assessment "
        "and to an eye test paid by the company every two years.",
    ),
    ("pagebreak",),
    ("h1", "10 IT and Data Security"),
    ("anchor", "hb_it"),
    (
        "p",
        "Passwords must be at least 14 characters long and must not be reused across systems. Multi-factor "
        "authentication is mandatory for email, the VPN and all client-facing systems. Suspected phishing "
        "emails must be reported with the Report Phishing button or to the IT Service Desk on extension 4400.",
    ),
    (
        "p",
        "Client drawings and models are classified as confidential and may only be stored on the company "
        "document management system. Removable storage devices are blocked on all company laptops.",
    ),
    ("h1", "11 Learning and Development"),
    ("anchor", "hb_learning"),
    (
        "p",
        "Each employee has a personal training budget of 1,500 pounds per year and up to 5 study days per year "
        "for approved courses. The company pays the membership fees of one professional engineering "
        "institution per employee. Chartership candidates are assigned a mentor from a different office.",
    ),
    ("pagebreak",),
    ("h1", "Section 12 Grievance and Disciplinary Procedure"),
    ("anchor", "hb_grievance"),
    (
        "p",
        "An employee who has a grievance should first raise it informally with their line manager. A formal "
        "grievance must be raised in writing within 20 working days of the matter complained about. A "
        "grievance meeting is held within 10 working days of receiving the written grievance.",
    ),
    ("h2", "12.1 Disciplinary procedure"),
    (
        "p",
        "Disciplinary warnings stay on file for 12 months for a first written warning and 24 months for a "
        "final written warning. Employees may be accompanied at any disciplinary meeting by a colleague or a "
        "trade union representative.",
    ),
    ("h2", "12.2 Appeals"),
    ("anchor", "hb_appeal"),
    (
        "p",
        "An appeal against a grievance or disciplinary outcome must be made in writing within 10 working days "
        "of the outcome letter. Appeals are heard by a director who was not involved in the original decision.",
    ),
    ("pagebreak",),
    ("h1", "13 Leaving the Company"),
    ("anchor", "hb_leaving"),
    (
        "p",
        "The notice period for employees is one month during the first two years of service and three months "
        "after two years of service. Unused annual leave is paid out with the final salary. Company equipment "
        "must be returned to the IT Service Desk on or before the last working day.",
    ),
    (
        "p",
        "Every leaver is offered an exit interview with a member of the People Team. Feedback from exit "
        "interviews is reported anonymously to the executive board twice a year.",
    ),
]
